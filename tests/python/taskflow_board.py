"""Drive a real taskflow RedisJobBoard for jobworker's interop tests.

Usage: taskflow_board.py HOST PORT NAMESPACE COMMAND [ARGS...]
Prints one JSON line (the last line of stdout) with the result.
HOST may be `sentinel=MASTER@H:P,H:P`: then PORT is the first sentinel's (on
127.0.0.1), and the rest are taskflow's `sentinel_fallbacks`.

Commands:
  post NAME PRIORITY DETAILS_JSON [BOOK_NAME BOOK_UUID]  -> {"uuid": ...}
  list                                -> [{"uuid","name","state","owner","priority","details","last_modified",
                                           "book_name","book_uuid"}...]
  claim UUID WHO [EXPIRY_SECONDS]     -> {"ok": true} | {"error": CLASS, "message": ...}
  consume UUID WHO / abandon UUID WHO / trash UUID WHO   (same reply shape)
"""
import json
import sys

from taskflow import exceptions as exc
from taskflow.jobs.backends import impl_redis
from taskflow.persistence import models


def connect(host, port, namespace):
    conf = {"host": host, "port": int(port), "namespace": namespace}
    if host.startswith("sentinel="):
        master, fallbacks = host[len("sentinel="):].split("@")
        conf.update(host="127.0.0.1", sentinel=master, sentinel_fallbacks=fallbacks.split(","))
    board = impl_redis.RedisJobBoard("interop", conf)
    board.connect()
    return board


def owner_of(board, job):
    try:
        return board.find_owner(job)
    except TypeError:  # taskflow 6.5.0 decodes None when the job is unclaimed
        return None


def find(board, uuid):
    for job in board.iterjobs(ensure_fresh=True):
        if job.uuid == uuid:
            return job
    print(json.dumps({"error": "NotListed", "message": "job %s is not listed" % uuid}))
    sys.exit(0)


def guarded(call):
    try:
        call()
        return {"ok": True}
    except exc.TaskFlowException as e:
        return {"error": type(e).__name__, "message": str(e)}


def main():
    host, port, namespace, command, *args = sys.argv[1:]
    board = connect(host, port, namespace)
    try:
        if command == "post":
            name, priority, details, *book = args
            book = models.LogBook(book[0], uuid=book[1]) if book else None
            job = board.post(name, book=book, details=json.loads(details), priority=priority)
            out = {"uuid": job.uuid}
        elif command == "list":
            out = []
            for job in board.iterjobs(ensure_fresh=True):
                last = job.last_modified
                out.append({
                    "uuid": job.uuid,
                    "name": job.name,
                    "state": job.state,
                    "owner": owner_of(board, job),
                    "priority": str(job.priority.value),
                    "details": job.details,
                    "sequence": job.sequence,
                    "last_modified": last.isoformat() if last else None,
                    "book_name": job.book_name,
                    "book_uuid": job.book_uuid,
                })
        elif command == "claim":
            uuid, who, *expiry = args
            job = find(board, uuid)
            out = guarded(lambda: board.claim(job, who, expiry=float(expiry[0]) if expiry else None))
        elif command in ("consume", "abandon", "trash"):
            uuid, who = args
            job = find(board, uuid)
            out = guarded(lambda: getattr(board, command)(job, who))
        else:
            raise SystemExit("unknown command %r" % command)
    finally:
        board.close()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
