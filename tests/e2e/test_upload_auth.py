# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--upload credentials: from --upload-auth-file (basic 'user:password' or
'Bearer TOKEN') or $BPFPROF_UPLOAD_AUTH, sent as the Authorization header to
a local receiver; credentials in a URL are never printed (not with -vvv, not
in errors), and leave bpfprof's command line once it runs."""
import base64
import http.server
import os
import signal
import subprocess
import threading
import time

from conftest import BPFPROF

SECRET = "s3cr3t-Pa55"


class Receiver(http.server.BaseHTTPRequestHandler):
    auth = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.auth.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.end_headers()


def serve():
    Receiver.auth = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def upload_run(tmp_path, url, extra=(), env=None, seconds=0.5):
    """--continuous at 0.3 s intervals pushing to url, from its first file on for a
    while; returns (stderr, its /proc/PID/cmdline then)."""
    d = tmp_path / "out"
    d.mkdir(exist_ok=True)
    p = subprocess.Popen([BPFPROF, "--continuous", str(d), "--interval", "0.3", "-F", "19",
                          "--upload", url] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        # running: a first interval written (however long start-up took here)
        end = time.monotonic() + 30
        while not any(f.endswith(".pb.gz") for f in os.listdir(d)) and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(seconds)
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            cmdline = f.read()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    return err, cmdline


def auth_file(tmp_path, text):
    f = tmp_path / "auth"
    f.write_text(text)
    os.chmod(f, 0o600)
    return str(f)


def test_auth_file_basic(tmp_path):
    srv = serve()
    try:
        err, _ = upload_run(tmp_path, f"http://127.0.0.1:{srv.server_port}",
                            ["--upload-auth-file", auth_file(tmp_path, f"agent:{SECRET}:x\n")])
    finally:
        srv.shutdown()
    want = "Basic " + base64.b64encode(f"agent:{SECRET}:x".encode()).decode()
    assert Receiver.auth and all(a == want for a in Receiver.auth), (Receiver.auth, err)
    assert SECRET not in err
    assert "plain http" in err  # told to use https


def test_auth_file_bearer(tmp_path):
    srv = serve()
    try:
        err, _ = upload_run(tmp_path, f"http://127.0.0.1:{srv.server_port}",
                            ["--upload-auth-file", auth_file(tmp_path, f"Bearer {SECRET}\n")])
    finally:
        srv.shutdown()
    assert Receiver.auth and all(a == f"Bearer {SECRET}" for a in Receiver.auth), Receiver.auth
    assert SECRET not in err


def test_auth_from_environment_not_inherited(tmp_path):
    """$BPFPROF_UPLOAD_AUTH works, and a command bpfprof starts does not see it."""
    srv = serve()
    seen = tmp_path / "child-env"
    env = dict(os.environ, BPFPROF_UPLOAD_AUTH=f"Bearer {SECRET}")
    d = tmp_path / "out"
    d.mkdir()
    try:
        r = subprocess.run([BPFPROF, "--continuous", str(d), "--interval", "0.3",
                            "--upload", f"http://127.0.0.1:{srv.server_port}", "--",
                            "sh", "-c", f"env > {seen}; sleep 1.2"],
                           capture_output=True, text=True, env=env, timeout=60)
    finally:
        srv.shutdown()
    assert r.returncode == 0, r.stderr
    assert Receiver.auth and all(a == f"Bearer {SECRET}" for a in Receiver.auth), Receiver.auth
    assert "BPFPROF_UPLOAD_AUTH" not in seen.read_text()


def test_url_userinfo_never_printed(tmp_path):
    srv = serve()
    try:
        err, cmdline = upload_run(tmp_path, f"http://uploader9:{SECRET}@127.0.0.1:{srv.server_port}/",
                                  ["-vvv"])
    finally:
        srv.shutdown()
    # curl still uses them
    want = "Basic " + base64.b64encode(f"uploader9:{SECRET}".encode()).decode()
    assert Receiver.auth and all(a == want for a in Receiver.auth), Receiver.auth
    assert SECRET not in err and "uploader9" not in err, err
    assert f"http://***@127.0.0.1:{srv.server_port}/" in err, err
    assert "--upload-auth-file" in err  # the warning says what to use instead
    # gone from ps once bpfprof runs
    assert SECRET.encode() not in cmdline, cmdline
    # nor in the one line refusing a bad URL
    r = subprocess.run([BPFPROF, "--continuous", str(tmp_path), "--upload",
                        f"ftp://agent:{SECRET}@example.com/"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert SECRET not in r.stderr and "ftp://***@example.com/" in r.stderr, r.stderr


def test_auth_file_errors(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [(["--upload-auth-file", str(tmp_path / "missing")], "No such file"),
             (["--upload-auth-file", str(fifo)], "regular file"),  # never blocks
             (["--upload-auth-file", auth_file(tmp_path, SECRET + "\n")], "USER:PASSWORD")]
    for extra, what in cases:
        r = subprocess.run([BPFPROF, "--continuous", str(tmp_path), "--upload", "http://x"]
                           + extra, capture_output=True, text=True, timeout=20)
        assert r.returncode == 2, (extra, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("bpfprof: "), r.stderr
        assert what in r.stderr and SECRET not in r.stderr, r.stderr
    r = subprocess.run([BPFPROF, "--continuous", str(tmp_path),
                        "--upload-auth-file", auth_file(tmp_path, "a:b\n")],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "needs --upload" in r.stderr, r.stderr
