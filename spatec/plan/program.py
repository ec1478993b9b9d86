"""A compiled program: the checked program and the plans of its phrases."""
from __future__ import annotations

from dataclasses import dataclass

from spatec.frontend.check import Program, check_file
from spatec.plan.build import plan_program
from spatec.plan.nodes import PhrasePlan


@dataclass
class Compiled:
    """A checked program with the plans of its phrases."""

    program: Program
    plans: list

    def plan(self, name: str) -> PhrasePlan:
        for p in self.plans:
            if p.name == name:
                return p
        raise KeyError(name)


def compile_program(path, text: str | None = None, mode: str = "batch") -> Compiled:
    """Check and plan a program; a construct with no back end for ``mode`` raises UnsupportedError."""
    program = check_file(path, text)
    return Compiled(program, plan_program(program, mode))
