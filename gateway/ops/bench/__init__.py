"""The benchmarks (``lastmile bench ...``), one module each, every one writing JSON and measuring each job in a
freshly spawned process with the one shared helper (:mod:`~gateway.ops.bench.measure`: wall and CPU seconds, the
peak resident memory of that job's process tree), so ratios come from measurements of one run:
:mod:`~gateway.ops.bench.transforms` (the six-condition fan-out against its floor), :mod:`~gateway.ops.bench.detectors`
(embedded-runtime throughput), :mod:`~gateway.ops.bench.triton` (the request shape through Triton and embedded),
:mod:`~gateway.ops.bench.gateway` (through a broker and a gateway against the in-process replay),
:mod:`~gateway.ops.bench.monitor` (the monitor end to end; its processes' jobs in
:mod:`~gateway.ops.bench.monitor_jobs`),
:mod:`~gateway.ops.bench.bus` (the two Kafka engines side by side) and :mod:`~gateway.ops.bench.gpu` (the GPU check;
its detectors part in :mod:`~gateway.ops.bench.gpu_detectors`)."""
