# Sourced by the tools/bench scripts that run siphon-bench against a baseline
# tool on 127.0.0.1 (baselines.sh, tcp-ab.sh, tcp-cost.sh): where they are, the
# repository, the siphon-bench they run unless told otherwise, and a free
# port for each server they start.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bench="$root/build/release/tools/bench/siphon-bench"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
