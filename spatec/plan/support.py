"""What the planner can lower today, refused by name where it cannot.

The front end accepts runs, phrases over phrases and place sets (SPEC §7-9)
and says in ``PhraseInfo.constructs`` which a phrase uses; their plans,
automata and runners are not built yet. Every path to a plan goes through
:func:`require_backend`, so a program that uses one stops with an error that
names the construct, the phrase and the mode, instead of failing somewhere
inside.
"""
from __future__ import annotations

from spatec.errors import UnsupportedError
from spatec.frontend.program import DERIVED, PLACE_BINDINGS, PLACE_SETS, RUNS, Program

#: constructs with no back end yet, in the order they are reported
NOT_YET = (RUNS, DERIVED, PLACE_SETS, PLACE_BINDINGS)


def unsupported(program: Program) -> list[tuple[str, str]]:
    """(construct, phrase) for each phrase's first construct that has no back end."""
    out = []
    for info in program.phrases:
        for construct in NOT_YET:
            if construct in info.constructs:
                out.append((construct, info.name))
                break
    return out


def require_backend(program: Program, mode: str = "batch") -> None:
    """Raise :class:`UnsupportedError` for the first construct of the program with no back end."""
    missing = unsupported(program)
    if missing:
        construct, phrase = missing[0]
        raise UnsupportedError(construct, mode, f"phrase {phrase} uses them and their back end is not built "
                                                "yet; `spatec check` accepts the program")
