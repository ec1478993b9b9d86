"""Run by tests/service/test_serve_hardening.py in a mount namespace of its own (``unshare
-m``): a 64 MiB tmpfs for the state of a `spatec serve`, filled and freed. Prints one JSON
line with what was seen."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spatec.feeds.recording import load_recording  # noqa: E402
from spatec.feeds.server import FeedServer  # noqa: E402
from tests.live.conftest import POLLS, minutes, program_of  # noqa: E402
from tests.service.conftest import Serve, call, free_port, wait_for  # noqa: E402


def main(tmp: Path) -> None:
    mnt = tmp / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], check=True)
    out = {}
    prog = program_of(tmp, "stuck")
    port = free_port()
    feed = FeedServer(minutes(load_recording(POLLS), 20), speed=4, port=port).start()
    srv = Serve(prog, [f"BusGPS=sirivm+http://127.0.0.1:{port}/"], mnt / "state", log_dir=tmp).start()
    filler = mnt / "filler"
    try:
        call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})
        wait_for(lambda: srv.status()["log"] > 0, 90, what="alerts")
        import shutil

        with open(filler, "wb", buffering=0) as f:   # every byte (unbuffered: nothing left to fail at close)
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
        out["free_when_full"] = shutil.disk_usage(mnt).free
        wait_for(lambda: srv.status()["broker"]["state"] == "disk full", 90, what="disk full reported")
        time.sleep(8)                               # polls keep coming: the server's writes fail meanwhile
        st = srv.status()
        out.update(full_state=st["broker"]["state"], full_healthy=st["healthy"], alerts_full=st["log"])
        out["full_post"] = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})[0]
        time.sleep(3)
        filler.unlink()
        wait_for(lambda: srv.status()["broker"]["state"] == "ok" and srv.status()["broker"]["restarts"] >= 1, 120,
                 what="the broker to recover")
        st = srv.status()
        out.update(after_state=st["broker"]["state"], after_restarts=st["broker"]["restarts"])
        out["after_post"] = call(srv, "POST", "/subscriptions", {"phrase": "Stuck"})[0]
        wait_for(lambda: srv.status()["log"] > out["alerts_full"], 180, what="alerts after the recovery")
        out["alerts_after"] = srv.status()["log"]
    except AssertionError as e:
        out["error"] = str(e)
        out["status"] = srv.status()
    finally:
        srv.stop()
        feed.stop()
        subprocess.run(["umount", "-l", str(mnt)])
    print(json.dumps(out))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
