"""Run pywb (in its own virtualenv) on an ephemeral loopback port, for tests/test_pywb.py.

    VENV/bin/python tests/pywb_server.py ROOT

serves the pywb collections under ``ROOT/collections`` (made by ``wb-manager init``) with pywb's
own WSGI app (``pywb.apps.frontendapp.FrontEndApp``, what ``wayback`` runs) on a gevent server
bound to 127.0.0.1 port 0, prints ``PORT <n>`` (flushed) once it listens, and serves until killed.
Only pywb and the standard library are imported: batchcrawl is not installed in pywb's venv.
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import sys  # noqa: E402

from gevent.pywsgi import WSGIServer  # noqa: E402
from pywb.apps.frontendapp import FrontEndApp  # noqa: E402


def main(root: str) -> None:
    os.chdir(root)
    app = FrontEndApp()
    server = WSGIServer(("127.0.0.1", 0), app, log=None)
    server.start()
    print(f"PORT {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
