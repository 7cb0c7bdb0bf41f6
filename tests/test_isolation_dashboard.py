"""The dashboard attacked from inside the sandbox: candidate code that, while it is measured,
reads the campaign's dashboard over loopback (the metric has the network by default) to learn
what was measured, or steals the token the dashboard keeps in the campaign's folder.

The promise asserted: the number kept is the one the committed tree honestly gives (the code
fakes a perfect score when it got anything), and the token appears in nothing the code
could write.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from autoresearch.views.dashboard import make_server
from test_isolation import NAME, READS, assert_honest, modes, run, user_repo

# The attack, as candidate code: calc.py, which the metric imports. N = 10 is its honest
# value (score 7, no better than the baseline); anything it learns makes it claim N = 3.
ATTACK = """cat > calc.py <<'EOF'
N = 10
import os, urllib.request, urllib.error
port = open("@PORT@").read().strip()
got = []
try:
    got.append(open("@STATE@/dashboard.token").read().strip())
except OSError:
    pass
for path in ("/", "/api/status", "/api/attempts", "/api/diff/1"):
    for query in ["", "?token=", "?token=" + "A" * 43] + ["?token=" + t for t in got]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}{query}", timeout=5) as r:
                got.append(r.read().decode())
        except urllib.error.HTTPError as refused:
            print("refused", refused.code)
        except (urllib.error.URLError, OSError):
            pass
if got:
    print("stolen:", got)
    N = 3
EOF
echo 'reads the dashboard while measured'"""


@pytest.mark.parametrize("isolation", modes(none=READS))
def test_candidate_code_reads_the_dashboard_over_loopback(tmp_path: Path, isolation: str) -> None:
    port_file = tmp_path / "port"
    repo, state = user_repo(
        tmp_path, isolation, {1: ATTACK.replace("@PORT@", str(port_file))}, iterations=1
    )
    server = make_server(repo, state, "127.0.0.1", 0)
    port_file.write_text(str(server.server_address[1]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = run(repo)
        token = server.token
    finally:
        server.shutdown()
        server.server_close()
    # the attack ran and was measured: the number kept is the honest one
    assert any(r.iteration == 1 and r.metric is not None for r in outcome.records)
    assert_honest(repo, outcome.records)
    # it did reach the server, which refused it
    logs = b"".join(p.read_bytes() for p in (state / "logs").glob("0001-metric-*.out"))
    assert b"refused 401" in logs
    # and nothing it could write holds the token
    written = b"".join(
        p.read_bytes()
        for p in (repo / ".autoresearch" / NAME).rglob("*")
        if p.is_file() and not p.is_symlink()
    )
    assert token.encode() not in written


# The same, as the proposer: its command runs with the network on, always.
PROPOSER = """sed -i 's/^N = .*/N = 7/' calc.py
@PY@ - <<'EOF'
import urllib.request, urllib.error
port = open("@PORT@").read().strip()
seen = []
try:
    seen.append(open("@STATE@/dashboard.token").read().strip())
except OSError:
    seen.append("no-token-file")
for query in ["", "?token=" + seen[0]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/attempts{query}", timeout=5) as r:
            seen.append(r.read().decode())
    except urllib.error.HTTPError as refused:
        seen.append(f"refused {refused.code}")
    except (urllib.error.URLError, OSError) as exc:
        seen.append(f"unreachable {exc}")
print(" | ".join(seen).replace("\\n", " "))
EOF"""


@pytest.mark.parametrize("isolation", modes(none=READS))
def test_the_proposer_reads_the_dashboard_over_loopback(tmp_path: Path, isolation: str) -> None:
    port_file = tmp_path / "port"
    script = PROPOSER.replace("@PORT@", str(port_file)).replace("@PY@", sys.executable)
    repo, state = user_repo(tmp_path, isolation, {1: script}, iterations=1)
    server = make_server(repo, state, "127.0.0.1", 0)
    port_file.write_text(str(server.server_address[1]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = run(repo)
        token = server.token
    finally:
        server.shutdown()
        server.server_close()
    (attempt,) = [r for r in outcome.records if r.iteration == 1]
    # what the proposer saw is its description: refused, with neither token nor records
    told = attempt.description or ""
    logs = "".join(p.read_text() for p in (state / "logs").glob("0001-propos*"))
    assert "refused 401" in told, (told, logs)
    assert token not in told and '"status"' not in told and "baseline" not in told
