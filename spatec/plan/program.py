"""A compiled program: the checked program and the plans of its phrases."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spatec.frontend.check import Program, check_file
from spatec.plan.build import physical_plan, plan_program
from spatec.plan.nodes import PhrasePlan
from spatec.plan.statistics import sample_statistics


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


def with_statistics(compiled: Compiled, frames: dict) -> Compiled:
    """``compiled`` with its physical plans made again from the statistics of a sample of the
    input (canonical event frames, type → DataFrame; SPEC §10). The logical plans and the
    composites are the same; only how joins find their candidates may change."""
    stats = sample_statistics({t: df for t, df in frames.items() if t in compiled.program.events})
    plans = [dataclasses.replace(p, physical=physical_plan(compiled.program, p, stats)) for p in compiled.plans]
    return Compiled(compiled.program, plans)


def unordered(compiled: Compiled) -> Compiled:
    """``compiled`` with every join scanning its other side (no keyed access): the plans as
    they were before statistics ordered them (for benchmarks and tests; same composites)."""
    plans = [dataclasses.replace(p, physical=dataclasses.replace(p.physical, joins=())) for p in compiled.plans]
    return Compiled(compiled.program, plans)
