"""Wiring with no command line: the adapter a run was armed with, the one liveness
check of a process, the driver's locks, ending a run no driver holds, keep-awake, the
login service, a parallel run, the daemon and its supervisor. The CLI, the demo,
``control``, ``manage``, hook mode and the view call these; a daemon or a parallel
runner does too. It imports nothing above the loop (docs/architecture.md, "Layers")."""
