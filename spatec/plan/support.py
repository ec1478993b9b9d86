"""What the planner can lower today, refused by name where it cannot.

The front end accepts runs, phrases over phrases and place sets (SPEC §7-9)
and says in ``PhraseInfo.constructs`` which a phrase uses; those in
:data:`NOT_YET` have no plans, automata and runners yet. Every path to a plan goes through
:func:`require_backend`, so a program that uses one stops with an error that
names the construct, the phrase and the mode, instead of failing somewhere
inside.
"""
from __future__ import annotations

from spatec.errors import UnsupportedError
from spatec.frontend.program import DERIVED, Program

#: constructs with no back end yet, in the order they are reported (runs, place sets and bound
#: places have one: spatec.automata.runs, spatec.automata.places; phrases as event types:
#: spatec.runtime.derived)
NOT_YET = ()
#: and per mode (mode → constructs); derived streams: the local runners have them, the Spark
#: runners refuse them by runner (:func:`require_flow`)
NOT_YET_IN: dict = {}


def unsupported(program: Program, mode: str = "batch") -> list[tuple[str, str]]:
    """(construct, phrase) for each phrase's first construct that has no back end in ``mode``."""
    out = []
    for info in program.phrases:
        for construct in NOT_YET + NOT_YET_IN.get(mode, ()):
            if construct in info.constructs:
                out.append((construct, info.name))
                break
    return out


def require_backend(program: Program, mode: str = "batch") -> None:
    """Raise :class:`UnsupportedError` for the first construct of the program with no back end."""
    missing = unsupported(program, mode)
    if missing:
        construct, phrase = missing[0]
        raise UnsupportedError(construct, mode, f"phrase {phrase} uses them and their back end is not built "
                                                "yet; `spatec check` accepts the program")


def require_flow(plans, mode: str) -> None:
    """Raise :class:`UnsupportedError` if one of ``plans`` reads another phrase's composites
    (SPEC §8) in a runner that has no derived streams yet (``mode``: "Spark batch", "Spark
    live"); the local runners (``spatec replay --runner local``, ``spatec live --runner
    local``) evaluate them."""
    for plan in plans:
        if plan.physical.derived:
            raise UnsupportedError(DERIVED, mode, f"phrase {plan.name} reads the composites of "
                                   f"{', '.join(plan.physical.derived)}; the local runners (spatec replay --runner local, "
                                   "spatec live --runner local) evaluate phrases over phrases")


def require_derived_only(plans, mode: str) -> None:
    """Raise :class:`UnsupportedError` if one of ``plans`` reads both another phrase's
    composites and input events, in a runner (``mode``: "Spark batch") that evaluates the
    phrases over phrases on the driver from the producers' composites alone (REFERENCE
    decision 37)."""
    for plan in plans:
        inputs = [t for t in plan.physical.types if t not in plan.physical.derived]
        if plan.physical.derived and inputs:
            raise UnsupportedError(DERIVED, mode, f"phrase {plan.name} reads the composites of "
                                   f"{', '.join(plan.physical.derived)} and input events "
                                   f"({', '.join(inputs)}); the Spark runner evaluates a phrase over "
                                   "phrases from composites only: use spatec replay --runner local")

