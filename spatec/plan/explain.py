"""`spatec explain`: a phrase's plan and automaton, as text, JSON or Graphviz dot.

Shows the operator tree with the stamps each node produces, where every
pattern and predicate was placed, the partition key, the bound on partial
matches, and the automaton's buffers with their pruning rules.
"""
from __future__ import annotations

import json

from spatec.frontend import ast as A
from spatec.frontend.check import Program
from spatec.plan.build import plan_program
from spatec.plan.nodes import Join, Leaf, Negation, Or, PhrasePlan

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
    if isinstance(n, Leaf):
        d = {"node": n.id, "kind": "event", "type": n.type or "*", "var": n.var, "bound": n.bound,
             "stamp": "the event's",
             "transitions": [{"on": n.type or "any event", "action": "TAKE",
                              "guard": [_text(f) for f in n.filters] + [_text(p) for p in n.preds]}]}
    elif isinstance(n, Join):
        d = {"node": n.id, "kind": "absence-between" if n.absence else "join", "op": n.op,
             "meaning": "sequence with nothing like X between" if n.absence else _OP_NAMES.get(n.op, n.op),
             "stamp": "hull", "left": node_dict(n.left), "right": node_dict(n.right),
             "buffers": ["left", "right"],
             "transitions": [{"on": "left match", "action": "COMBINE with buffered right; KEEP"},
                             {"on": "right match", "action": "COMBINE with buffered left; KEEP"}]}
        if n.absence:
            d["absence"] = neg_dict(n.absence)
    elif isinstance(n, Or):
        d = {"node": n.id, "kind": "or", "stamp": "the branch's", "left": node_dict(n.left),
             "right": node_dict(n.right), "transitions": [{"on": "either match", "action": "PROCEED"}]}
    else:
        d = {"node": n.id, "kind": "absence-after", "stamp": "the left operand's",
             "left": node_dict(n.left), "absence": neg_dict(n.absence),
             "transitions": [{"on": "left match", "action": "WAIT until watermark passes hi + window"}]}
    if not isinstance(n, Leaf):
        d["filters"] = [_text(f) for f in n.filters]
        d["predicates"] = [_text(p) for p in n.preds]
    return d


def neg_dict(neg: Negation) -> dict:
    return {"negation": neg.id, "var": neg.var,
            "events": [{"type": l.type or "*", "filters": [_text(f) for f in l.filters]} for l in neg.leaves],
            "left_space": neg.left_space or None, "right_space": neg.right_space or None,
            "window_s": _us(neg.window), "conditions": [_text(c) for c in neg.conds],
            "decided": ("when the watermark passes A.hi + window" if neg.window is not None
                        else "when the watermark reaches B.hi")}


def plan_dict(plan: PhrasePlan) -> dict:
    return {
        "phrase": plan.name,
        "partition_key": list(plan.key), "key_from": plan.key_source,
        "within_s": _us(plan.within),
        "bound": ("span <= %g s" % _us(plan.span_bound)) if plan.span_bound is not None
        else "successive" if plan.deferred else "none",
        "variables": dict(sorted(plan.vars.items())), "negated": dict(sorted(plan.negated.items())),
        "decided_at_end": [_text(c) for c in plan.deferred],
        "output": [["phrase", "str"], ["id", "str"], ["lo", "time"], ["hi", "time"], ["hull", "geometry"],
                   ["events", "map"]] + [list(x) for x in plan.schema],
        "tree": node_dict(plan.root),
    }


def explain(program: Program, phrase: str | None = None, fmt: str = "json") -> str:
    plans = plan_program(program)
    if phrase is not None:
        plans = [p for p in plans if p.name == phrase]
        if not plans:
            from spatec.errors import SpatecError

            names = ", ".join(p.name for p in plan_program(program)) or "none"
            raise SpatecError(f"no phrase {phrase} (phrases: {names})")
    dicts = [plan_dict(p) for p in plans]
    if fmt == "json":
        return json.dumps(dicts, indent=2, ensure_ascii=False) + "\n"
    if fmt == "dot":
        return _dot(dicts)
    return "\n".join(_text_tree(d) for d in dicts)


def _text_tree(d: dict) -> str:
    lines = [f"phrase {d['phrase']}",
             f"  partition key: {', '.join(d['partition_key']) or '(none: one partition)'} ({d['key_from']})",
             f"  bound: {d['bound']}" + (f", within {d['within_s']:g} s" if d['within_s'] else "")]
    if d["decided_at_end"]:
        lines.append("  decided with history: " + "; ".join(d["decided_at_end"]))

    def rec(n, depth):
        pad = "  " * depth
        if n["kind"] == "event":
            g = n["transitions"][0]["guard"]
            lines.append(f"{pad}[{n['node']}] {n['type']} -> {n['var']}" + (f"  where {' and '.join(g)}" if g else ""))
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
        for k in ("left", "right"):
            if k in n:
                rec(n[k], depth + 1)

    rec(d["tree"], 2)
    return "\n".join(lines) + "\n"


def _dot(dicts) -> str:
    out = ["digraph spatec {", "  node [shape=box, fontname=Helvetica];"]

    def rec(n, prefix):
        me = f"{prefix}_{n['node']}"
        if n["kind"] == "event":
            label = f"{n['type']} -> {n['var']}"
        else:
            label = {"join": n.get("op", ""), "absence-between": "; not X ;", "or": "or",
                     "absence-after": "; not X within"}[n["kind"]]
        label = label.replace('"', '\\"')
        out.append(f'  {me} [label="{label}"];')
        for k in ("left", "right"):
            if k in n:
                child = rec(n[k], prefix)
                out.append(f"  {me} -> {child};")
        return me

    for d in dicts:
        out.append(f'  subgraph "cluster_{d["phrase"]}" {{ label="{d["phrase"]}";')
        rec(d["tree"], d["phrase"])
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"
