"""The DBOS contender of approval latency: DBOS Transact's human-in-the-loop idiom (`bench`
extra only). A DBOS workflow waits in `DBOS.recv`; the operator's approval is an HTTP `POST`
to a small endpoint served by a thread of this process, which wakes it with `DBOS.send`; the
workflow's tool step then runs and stamps the moment. Latency = that stamp − the moment the
request was sent, as ours is measured. On the same PostgreSQL (schema `bench_dbos`)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import wait_for
from bench.common.dbos_ref import SCHEMA, dbos_launch

TOPIC = "decision"
_RAN: dict[str, float] = {}
_DONE = threading.Condition()


def _declare() -> Any:
    from dbos import DBOS

    @DBOS.step(name="bench.approval.tool")
    def dbos_approved_tool(token: str) -> float:
        ran = time.perf_counter()
        with _DONE:
            _RAN[token] = ran
            _DONE.notify_all()
        return ran

    @DBOS.workflow(name="bench.approval.wait")
    def dbos_wait_for_approval(token: str) -> str:
        decision = DBOS.recv(TOPIC, timeout_seconds=120)
        if decision != "approve":
            return f"not approved: {decision!r}"
        dbos_approved_tool(token)
        return "done"

    return dbos_wait_for_approval


# Declared at import, before DBOS is launched (the benchmark launches it when it starts).
_WAIT = _declare()


class _Decision(BaseHTTPRequestHandler):
    """`POST /decision/<workflow id>` {"decision": "approve"} → `DBOS.send` to the workflow."""

    def do_POST(self) -> None:
        from dbos import DBOS

        workflow_id = self.path.rsplit("/", 1)[-1]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        DBOS.send(workflow_id, body["decision"], TOPIC)
        reply = json.dumps({"workflow": workflow_id, "sent": body["decision"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class DbosApproval:
    def __init__(self) -> None:
        dbos_launch()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Decision)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/decision/"

    def _waiting(self, workflow_id: str) -> bool:
        """The workflow is in `recv`: its durable timeout is recorded (the step DBOS writes just
        before it waits on the notification)."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {SCHEMA}.operation_outputs"
                " WHERE workflow_uuid = %s AND function_name = 'DBOS.sleep'",
                [workflow_id],
            )
            return cursor.fetchone() is not None

    def one(self) -> float:
        """One approval: the workflow started and waiting, the POST sent → seconds until its
        tool step ran."""
        from dbos import DBOS, SetWorkflowID

        token = uuid.uuid4().hex
        with SetWorkflowID(token):
            handle = DBOS.start_workflow(_WAIT, token)
        wait_for(lambda: self._waiting(token), timeout=60, interval=0.005, what="DBOS recv")
        request = urllib.request.Request(
            self.url + token,
            data=json.dumps({"decision": "approve"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        sent = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
        with _DONE:
            if not _DONE.wait_for(lambda: token in _RAN, timeout=60):
                raise RuntimeError("DBOS's approved step did not run")
            ran = _RAN.pop(token)
        if handle.get_result() != "done":
            raise RuntimeError("DBOS's workflow was not approved")
        return ran - sent

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
