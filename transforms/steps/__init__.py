"""Step kinds: each kind (vp9, scale, fps, badge, h264, trim, speed, reorder) is one module that owns its spec
model, its engine node, its ffmpeg-CLI equivalent, its floor cost and its pass scheduling, declared as one
:class:`transforms.steps.kind.StepKind`. :data:`transforms.steps.registry.STEPS` lists them; the spec's step
union, the engine, the CLI cross-check, the floor and the pass scheduler look a step's kind up there.
"""
