"""What the supervisor (``runtime.supervisor``) and its acts on the run's files
(``runtime.supervisor_acts``, run in a forked child) share: the files a detached run's
processes write in its folder, and the exit codes the acts' child answers with.
Standard library only, nothing imported: the supervisor stays a bare interpreter.
"""

DAEMON_OUT = "daemon.out"
"""The daemon's stdout, appended to, in the run folder."""
DAEMON_ERR = "daemon.err"
"""The daemon's stderr, appended to, in the run folder."""
SUPERVISOR_LOG = "supervisor.log"
"""The supervisor's stderr, in the run folder."""

KEEP_GOING = 0
"""``SupervisorActs.after_exit``: start the daemon again."""
STOP = 10
"""``SupervisorActs.after_exit``: the supervisor's work is done."""
