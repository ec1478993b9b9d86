"""`spatec explain`: a phrase's plan and automaton, as text, JSON, Graphviz dot or SVG.

Shows the operator tree with the stamps each node produces, where every
pattern and predicate was placed, the partition key, the bound on partial
matches, the automaton's buffers with their pruning rules, and the physical
plan (:mod:`spatec.plan.physical`): the evaluator, key routing, source history,
the leaf pre-filter's regions, whether the phrase may be cut in time, the
attributes read, and the automaton's fingerprint.
"""
from __future__ import annotations

import json

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.plan.build import plan_program
from spatec.plan.nodes import Join, Leaf, Negation, Or, PhrasePlan, walk_nodes
from spatec.plan.statistics import sample_statistics

_OP_NAMES = {";": "sequence", "||": "concurrency", "=": "same place", "<>": "different place",
             ";=": "sequence, same place", ";<>": "sequence, different place",
             "||=": "concurrent, same place", "||<>": "concurrent, different place", "and": "conjunction"}


def _text(node) -> str:
    from spatec.frontend.printer import print_expr, print_match

    try:
        return print_match(node) if not _is_expr(node) else print_expr(node)
    except Exception:  # noqa: BLE001 - printing is best effort for explain
        return type(node).__name__


def _is_expr(node) -> bool:
    return isinstance(node, (A.Num, A.Quantity, A.Str, A.BoolLit, A.TimeLit, A.Var, A.Attr, A.Call,
                             A.BinOp, A.BoolOp, A.UnaryOp))


def _us(v):
    return None if v is None else v / 1e6


def node_dict(n) -> dict:
    """The operator tree below ``n`` as explain's nested dicts (without recursion)."""
    return A.trampoline(_node_walk(n))


def _node_walk(n):
    # a generator for A.trampoline
    if isinstance(n, Leaf):
        d = {"node": n.id, "kind": "event", "type": n.type or "*", "var": n.var, "bound": n.bound,
             "stamp": "the event's",
             "transitions": [{"on": n.type or "any event", "action": "TAKE",
                              "guard": [_text(f) for f in n.filters] + [_text(p) for p in n.preds]}]}
        if n.run is not None:
            d.update(run_dict(n.run))
    elif isinstance(n, Join):
        d = {"node": n.id, "kind": "absence-between" if n.absence else "join", "op": n.op,
             "meaning": "sequence with nothing like X between" if n.absence else _OP_NAMES.get(n.op, n.op),
             "stamp": "hull", "left": (yield _node_walk(n.left)), "right": (yield _node_walk(n.right)),
             "buffers": ["left", "right"],
             "transitions": [{"on": "left match", "action": "COMBINE with buffered right; KEEP"},
                             {"on": "right match", "action": "COMBINE with buffered left; KEEP"}]}
        if n.absence:
            d["absence"] = neg_dict(n.absence)
    elif isinstance(n, Or):
        d = {"node": n.id, "kind": "or", "stamp": "the branch's", "left": (yield _node_walk(n.left)),
             "right": (yield _node_walk(n.right)), "transitions": [{"on": "either match", "action": "PROCEED"}]}
    else:
        d = {"node": n.id, "kind": "absence-after", "stamp": "the left operand's",
             "left": (yield _node_walk(n.left)), "absence": neg_dict(n.absence),
             "transitions": [{"on": "left match", "action": "WAIT until watermark passes hi + window"}]}
    if not isinstance(n, Leaf):
        d["filters"] = [_text(f) for f in n.filters]
        d["predicates"] = [_text(p) for p in n.preds]
    return d


def run_dict(r) -> dict:
    """A run leaf (SPEC §7): how its events are cut and what its running summary holds."""
    return {"kind": "run", "stamp": "the run's: [first lo, last hi] and the hull of its events",
            "run": {"cut_per": r.source, "filter": _text(r.filter) if r.filter is not None else None,
                    "while": _text(r.cond) if r.cond is not None else None, "gap_s": _us(r.gap),
                    "summary": ["first", "last", "count", "lo", "hi", "hull"]
                    + [f"{f}({r.var}.{a})" for f, a in r.aggregates],
                    "complete": "when the source's next event does not join"
                    + (f", or the watermark passes last.hi + {_us(r.gap):g} s" if r.gap is not None else "")}}


def neg_dict(neg: Negation) -> dict:
    return {"negation": neg.id, "var": neg.var,
            "events": [{"type": l.type or "*", "filters": [_text(f) for f in l.filters]} for l in neg.leaves],
            "left_space": neg.left_space or None, "right_space": neg.right_space or None,
            "window_s": _us(neg.window), "conditions": [_text(c) for c in neg.conds],
            "decided": ("when the watermark passes A.hi + window" if neg.window is not None
                        else "when the watermark reaches B.hi")}


def physical_dict(plan: PhrasePlan, program: Program | None = None) -> dict:
    phys = plan.physical
    out = {"evaluator": phys.evaluator, "key": list(phys.key), "types": list(phys.types),
           "keyed_types": list(phys.keyed), "broadcast_types": list(phys.broadcast),
           "successive": phys.successive, "source_history": list(phys.source_history),
           "prefilter": {t: [r.describe() for r in rs] for t, rs in phys.prefilter},
           "local_in_time": phys.local_in_time, "proximity_m": phys.proximity,
           "attributes": {t: list(a) for t, a in phys.attributes},
           **estimates_dict(plan)}
    if program is not None:
        from spatec.automata.compile import compile_automaton

        spec = compile_automaton(plan, program)
        out["automaton"] = {
            "fingerprint": spec.fingerprint(),
            "buffers": [{"join": nid, "side": "left" if side == "L" else "right",
                         "dropped": _rules_text(dict(rules))} for (nid, side), rules in spec.rules]}
    return out


def estimates_dict(plan: PhrasePlan) -> dict:
    """The estimates the planner chose by and what it chose (SPEC §10): where they come from,
    the input types' rates, each node's rate, each join condition's selectivity, and each
    join's access (``plan.physical``: :mod:`spatec.plan.order`)."""
    phys = plan.physical
    st = phys.estimates
    if st is None:
        return {}
    access = {j.join: j for j in phys.joins}
    joins = []
    for n in walk_nodes(plan.root):
        if not isinstance(n, Join):
            continue
        j = access.get(n.id)
        joins.append({"join": n.id, "access": j.kind if j else "scan",
                      "how": j.describe() if j else "scan the other side",
                      "tried": j.tried if j else 1.0,
                      "conditions": [{"where": text, "selectivity": sel}
                                     for nid, text, sel in phys.selectivities if nid == n.id]})
    return {"estimates": {
        "from": st.origin, "about": st.describe(),
        "types": [{"type": t.name, "rate_per_s": t.rate, "sources": t.sources, "area_km2": t.area / 1e6}
                  for t in st.types],
        "rate_per_s": {str(nid): r for nid, r in phys.rates}},
        "joins": joins}


def _rules_text(r: dict) -> list:
    out = []
    if "conc" in r:
        out.append(f"hi older than the watermark less {_us(r['conc']):g} s (concurrency)")
    if r.get("seq_right"):
        out.append("nothing can still come certainly before it")
    for kind, slot in r.get("succ", ()):
        out.append(f"slot {slot}: its {'previous' if kind == 'prev' else 'next'} event of the source is past")
    return out or ["by the span bound only"]


def flow_dict(plan: PhrasePlan, program: Program | None) -> dict:
    """The phrase's place in the program's flow graph (SPEC §8): the phrases it reads, those
    that read it, and what its derived stream's watermark (its frontier) waits for."""
    if program is None:
        return {"inputs": list(plan.physical.derived), "consumers": []}
    out = {"inputs": list(program.flow.inputs.get(plan.name, ())),
           "consumers": list(program.flow.consumers(plan.name))}
    if out["consumers"]:
        info = program.phrase(plan.name)
        waits = ["the least lo of its undecided composites"]
        if info.waits_for_sources:
            waits.append("each source with an open run reporting again (a run without gap)")
        waits += [f"{q}'s frontier" for q in out["inputs"]]
        out["frontier"] = waits
    return out


def as_event_dict(ae) -> dict:
    """A phrase's ``as event`` (SPEC §8): its composites' source and time stamp as events."""
    stamp = ae.low if ae.high is None else f"{ae.low} .. {ae.high}"
    return {"source": list(ae.source) or None, "time": stamp, "t": ae.high or ae.low,
            "order": ("exact per source, by t (successive applies)" if ae.source
                      else "by the declared stamp (no source)")}


def plan_dict(plan: PhrasePlan, program: Program | None = None) -> dict:
    return {
        "phrase": plan.name,
        "flow": flow_dict(plan, program),
        "partition_key": list(plan.key), "key_from": plan.key_source,
        "within_s": _us(plan.within),
        "bound": ("span <= %g s" % _us(plan.span_bound)) if plan.span_bound is not None
        else "successive" if plan.deferred else "none",
        "variables": dict(sorted(plan.vars.items())), "negated": dict(sorted(plan.negated.items())),
        "decided_at_end": [_text(c) for c in plan.deferred],
        "output": [["phrase", "str"], ["id", "str"], ["lo", "time"], ["hi", "time"], ["hull", "geometry"],
                   ["events", "map"]] + ([["places", "map"]] if plan.places else [])
        + [list(x) for x in plan.schema],
        **({"places": {v: {"set": b.place, "test": "certainly at" if b.certainly else "at",
                       "matched": ("one match, at the place whose centre is nearest the stamp's (ties: the "
                                   "first in the file), candidates from a spatial index (STRtree)"
                                   if getattr(b, "nearest", False) else
                                   "one match per place, candidates from a spatial index (STRtree)")}
                   for v, b in sorted(plan.places.items())}} if plan.places else {}),
        **({"as_event": as_event_dict(plan.as_event)} if plan.as_event is not None else {}),
        "tree": node_dict(plan.root),
        "physical": physical_dict(plan, program),
    }


def explain(program: Program, phrase: str | None = None, fmt: str = "json", frames: dict | None = None) -> str:
    """``frames`` (type → canonical events): the estimates come from a sample of them
    (SPEC §10), as a runner given that input plans; None: from the declared defaults."""
    stats = sample_statistics({t: df for t, df in frames.items() if t in program.events}) if frames else None
    plans = plan_program(program, stats=stats)
    if phrase is not None:
        plans = [p for p in plans if p.name == phrase]
        if not plans:
            from spatec.errors import SpatecError

            names = ", ".join(p.name for p in plan_program(program)) or "none"
            raise SpatecError(f"no phrase {phrase} (phrases: {names})")
    dicts = [plan_dict(p, program) for p in plans]
    if fmt == "json":
        return json.dumps([flat_tree(d) for d in dicts], indent=2, ensure_ascii=False) + "\n"
    if fmt == "dot":
        return _dot(dicts)
    if fmt == "svg":
        return to_svg(_dot(dicts))
    return "\n".join(_text_tree(d) for d in dicts)


#: the deepest operator tree explain's JSON writes nested (REFERENCE, decision 35); a deeper
#: one is written as a flat list of nodes (JSON readers, Python's own included, stop at about
#: 1,000 levels of nesting)
JSON_NESTED_DEPTH = 100


def _children(n: dict) -> list:
    return [n[k] for k in ("left", "right") if k in n]


def flat_tree(d: dict) -> dict:
    """``d`` (:func:`plan_dict`) with its tree flat if deeper than :data:`JSON_NESTED_DEPTH`:
    ``"tree": {"root": id, "nodes": [...]}``, each node as nested explain writes it but with
    ``left``/``right`` its children's ids, parents before children (left before right)."""
    best, stack = 0, [(d["tree"], 1)]
    while stack:
        n, level = stack.pop()
        best = max(best, level)
        stack += [(c, level + 1) for c in _children(n)]
    if best <= JSON_NESTED_DEPTH:
        return d
    nodes, stack = [], [d["tree"]]
    while stack:
        n = stack.pop()
        nodes.append({k: (v["node"] if k in ("left", "right") else v) for k, v in n.items()})
        stack += reversed(_children(n))
    return {**d, "tree": {"root": d["tree"]["node"], "nodes": nodes}}


def to_svg(dot: str) -> str:
    """Graphviz's rendering of ``dot`` as SVG (``dot -Tsvg``)."""
    import shutil
    import subprocess

    from spatec.errors import SpatecError

    exe = shutil.which("dot")
    if exe is None:
        raise SpatecError("--format svg needs Graphviz's `dot` on PATH (Debian: apt-get install graphviz); "
                          "--format dot writes the graph for it")
    got = subprocess.run([exe, "-Tsvg"], input=dot.encode("utf-8"), capture_output=True, timeout=120)
    if got.returncode != 0:
        raise SpatecError(f"dot failed: {got.stderr.decode('utf-8', 'replace').strip()}")
    return got.stdout.decode("utf-8")


def _text_tree(d: dict) -> str:
    lines = [f"phrase {d['phrase']}",
             f"  partition key: {', '.join(d['partition_key']) or '(none: one partition)'} ({d['key_from']})",
             f"  bound: {d['bound']}" + (f", within {d['within_s']:g} s" if d['within_s'] else "")]
    if d["decided_at_end"]:
        lines.append("  decided with history: " + "; ".join(d["decided_at_end"]))
    flow = d.get("flow", {})
    if flow.get("inputs"):
        lines.append(f"  reads the composites of: {', '.join(flow['inputs'])} (decides by their frontiers)")
    if flow.get("consumers"):
        lines.append(f"  read by: {', '.join(flow['consumers'])}; its frontier waits for "
                     + "; ".join(flow["frontier"]))
    for v, b in d.get("places", {}).items():
        lines.append(f"  place {v}: {b['test']} {b['set']}, {b['matched']}")
    ae = d.get("as_event")
    if ae:
        lines.append(f"  as event: source {', '.join(ae['source']) if ae['source'] else '(none)'}; "
                     f"time {ae['time']}; ordered {ae['order']}")

    def one(n, depth):
        pad = "  " * depth
        if n["kind"] in ("event", "run"):
            g = n["transitions"][0]["guard"]
            lines.append(f"{pad}[{n['node']}] {_leaf_label(n)}" + (f"  where {' and '.join(g)}" if g else ""))
            if "run" in n:
                r = n["run"]
                lines.append(f"{pad}    cut per {r['cut_per']}; summary: {', '.join(r['summary'])}; "
                             f"complete {r['complete']}")
            return
        head = {"join": f"{n.get('op')}  ({n.get('meaning')})", "absence-between": "; not X ;  (absence between)",
                "or": "or", "absence-after": "; not X within D  (absence after)"}[n["kind"]]
        extra = n.get("filters", []) + n.get("predicates", [])
        lines.append(f"{pad}[{n['node']}] {head}  stamp: {n['stamp']}" + (f"  where {' and '.join(extra)}" if extra else ""))
        if "absence" in n:
            a = n["absence"]
            ev = " or ".join(e["type"] + (f" ({' and '.join(e['filters'])})" if e["filters"] else "") for e in a["events"])
            lines.append(f"{pad}    no {ev}" + (f" as {a['var']}" if a["var"] else "")
                         + (f" where {' and '.join(a['conditions'])}" if a["conditions"] else "")
                         + f"; {a['decided']}")

    stack = [(d["tree"], 2)]     # depth first, without recursion (trees of any depth)
    while stack:
        n, depth = stack.pop()
        one(n, depth)
        stack += [(c, depth + 1) for c in reversed(_children(n))]
    lines += _physical_lines(d["physical"])
    return "\n".join(lines) + "\n"


def _leaf_label(n: dict) -> str:
    if "run" not in n:
        return f"{n['type']} -> {n['var']}"
    r = n["run"]
    src = n["type"] + (f" and {r['filter']}" if r["filter"] else "")
    return (f"run {src if not r['filter'] else '(' + src + ')'} -> {n['var']}"
            + (f" while {r['while']}" if r["while"] else "") + (f" gap {r['gap_s']:g} s" if r["gap_s"] else ""))


def _physical_lines(ph: dict) -> list:
    key = ", ".join(ph["key"]) or "(none: one partition)"
    lines = ["  physical plan:",
             f"    evaluator: {ph['evaluator']}",
             f"    routing: key {key}; keyed {', '.join(ph['keyed_types']) or '-'}; "
             f"broadcast {', '.join(ph['broadcast_types']) or '-'}",
             f"    successive: {'yes' if ph['successive'] else 'no'}"
             + (f"; history of the sources of {', '.join(ph['source_history'])} from other keys"
                if ph["source_history"] else "")]
    pre = "; ".join(f"{t}: {' or '.join(rs)}" for t, rs in ph["prefilter"].items())
    lines.append(f"    pre-filter: {pre or 'none'}")
    lines.append(f"    cut in time: {'yes (matches local in time)' if ph['local_in_time'] else 'no'}")
    if ph.get("proximity_m") is not None:
        lines.append(f"    cut in space: pairs within {ph['proximity_m']:g} m (a distance join, "
                     "instead of one partition)")
    attrs = "; ".join(f"{t}: {', '.join(a) or '-'}" for t, a in ph["attributes"].items())
    lines.append(f"    attributes read: {attrs or '-'}")
    if "estimates" in ph:
        e = ph["estimates"]
        lines.append(f"    estimates from {e['about']}")
        for t in e["types"]:
            lines.append(f"      {t['type']}: {t['rate_per_s']:.3g} events/s, {t['sources']} sources, "
                         f"{t['area_km2']:.3g} km²")
        rates = e["rate_per_s"]
        lines.append("      partial matches/s: " + ", ".join(f"[{k}] {v:.3g}" for k, v in rates.items()))
        for j in ph["joins"]:
            conds = ", ".join(f"{c['where']} {c['selectivity']:.2g}" for c in j["conditions"])
            lines.append(f"    join [{j['join']}]: {j['how']}; tries {j['tried']:.2g} of the other side"
                         + (f"; selectivity {conds}" if conds else ""))
    if "automaton" in ph:
        lines.append(f"    automaton: fingerprint {ph['automaton']['fingerprint']}")
        for b in ph["automaton"]["buffers"]:
            lines.append(f"      buffer [{b['join']}] {b['side']}: dropped when {'; '.join(b['dropped'])}")
    return lines


def _dot(dicts) -> str:
    out = ["digraph spatec {", "  node [shape=box, fontname=Helvetica];", "  rankdir=BT;"]

    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"')

    def one(n, prefix):
        me = f"{prefix}_{n['node']}"
        if n["kind"] in ("event", "run"):
            label = _leaf_label(n)
            conds = n["transitions"][0]["guard"]
        else:
            label = {"join": f"{n.get('op', '')}  ({n.get('meaning', '')})", "absence-between": "; not X ;",
                     "or": "or", "absence-after": "; not X within"}[n["kind"]]
            conds = n.get("filters", []) + n.get("predicates", [])
            if "absence" in n:
                a = n["absence"]
                ev = " or ".join(e["type"] + (f" ({' and '.join(e['filters'])})" if e["filters"] else "")
                                 for e in a["events"])
                conds = conds + [f"no {ev}" + (f" where {' and '.join(a['conditions'])}" if a["conditions"] else "")]
        text = "\\n".join([esc(label)] + [esc("where " + c) for c in conds])
        out.append(f'  "{me}" [label="{text}"];')
        return me

    def rec(n, prefix):
        # each node, then for each child its sub-tree and the edge to the node; without recursion
        stack = [n]
        while stack:
            x = stack.pop()
            if isinstance(x, str):
                out.append(x)
                continue
            me = one(x, prefix)
            for c in reversed(_children(x)):
                stack.append(f'  "{prefix}_{c["node"]}" -> "{me}";')
                stack.append(c)

    for d in dicts:
        name = d["phrase"]
        out.append(f'  subgraph "cluster_{esc(name)}" {{ label="{esc(name)}";')
        rec(d["tree"], name)
        info = [f"key: {', '.join(d['partition_key']) or 'none'} ({d['key_from']})"]
        info += [line.strip() for line in _physical_lines(d["physical"])[1:]]
        text = "\\l".join(esc(x) for x in info) + "\\l"
        out.append(f'  "{esc(name)}_physical" [shape=note, label="{text}"];')
        out.append("  }")
    edges = [(q, d["phrase"]) for d in dicts for q in d.get("flow", {}).get("inputs", ())]
    if edges:
        # the flow graph: a phrase's composites flow to the phrases that read them
        out.append('  subgraph "cluster_flow" { label="flow graph"; node [shape=ellipse];')
        for name in dict.fromkeys(n for e in edges for n in e):
            out.append(f'  "flow:{esc(name)}" [label="{esc(name)}"];')
        for q, p in edges:
            out.append(f'  "flow:{esc(q)}" -> "flow:{esc(p)}";')
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"
