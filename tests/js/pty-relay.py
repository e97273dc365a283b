# A terminal for a test: runs the command given as arguments in a new
# pseudo-terminal (80 x 24) and relays bytes both ways -- this process's
# stdin to the terminal's keyboard (so "\x03" is a Ctrl-C and "\x04" a
# Ctrl-D, as the terminal's line discipline reads them), and everything the
# command shows on the terminal to this process's stdout. Exits as the
# command does: its exit code, or 128 + the signal that ended it. What
# cli.test.mjs drives the CLI's chat through; Python's pty module, since
# Node has no pseudo-terminal of its own.
import fcntl
import os
import pty
import select
import struct
import sys
import termios

pid, terminal = pty.fork()
if pid == 0:
    # The child: its stdin is the terminal. Sized before the command starts,
    # which reads the width once.
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 80, 0, 0))
    os.execvp(sys.argv[1], sys.argv[1:])

keyboard = sys.stdin.fileno()
inputs = [terminal, keyboard]
while True:
    ready, _, _ = select.select(inputs, [], [])
    if keyboard in ready:
        typed = os.read(keyboard, 4096)
        if typed:
            os.write(terminal, typed)
        else:
            inputs.remove(keyboard)  # the test has no more to type: the command goes on
    if terminal in ready:
        try:
            shown = os.read(terminal, 4096)
        except OSError:  # EIO: every process holding the terminal has closed it
            shown = b''
        if not shown:
            break
        os.write(sys.stdout.fileno(), shown)

_, status = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
