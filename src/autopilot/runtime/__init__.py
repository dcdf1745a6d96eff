"""Wiring with no command line: arm and drive a run, the adapter a run was armed with,
the one liveness check of a process, the driver's locks, messages and their delivery,
the OFF switch, notifications, keep-awake, the login service, the daemon and its
supervisor. The CLI, the demo, ``control`` and the view call these; a daemon or a
parallel runner does too."""
