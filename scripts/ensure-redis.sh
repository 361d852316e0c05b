# Sourced by the other scripts: installs redis-server from Debian's packages when it
# is missing. Tests and demos start their own servers; nothing is left running.
# redis-cli (redis-tools, a dependency of the package) makes the test clusters.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    echo "redis-server or redis-cli not found; installing them with apt-get" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
    # Debian starts the packaged service; our tests use their own servers.
    $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
# The test of `latchkey top` drives it in tmux and reads the screen.
if ! command -v tmux >/dev/null 2>&1; then
    echo "tmux not found; installing it with apt-get" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tmux >/dev/null
fi
