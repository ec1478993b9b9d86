"""One batch execution for every batch runner: what a replay does, written once.

A replay cuts its inputs into splits (:mod:`~spatec.exec.splits`), reads and types each
split into canonical events and rejects, decides what needs the whole input (copies across
splits, the metric CRS, the final watermark: :mod:`~spatec.exec.decide`), gives each phrase's
events to groups — by key, or by stretch of time (:mod:`~spatec.exec.groups`) —, matches a
group (:mod:`~spatec.exec.match`), renders its composites as parts of the output files
(:mod:`~spatec.exec.parts`) and commits the outputs (:mod:`~spatec.exec.commit`). The
settings are read once into a :class:`~spatec.exec.context.RunContext`; the steps run on an
:class:`~spatec.exec.executor.Executor`: in this process (``--runner local``) or on Spark
(:mod:`spatec.runners.spark.executor`), where Spark reads, shuffles, schedules and writes.
"""
