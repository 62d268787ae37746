"""Posts `resize` jobs to a taskflow RedisJobBoard: the Python side of the
example. Usage: post_jobs.py HOST PORT NAMESPACE PATH WIDTH [PATH WIDTH...]
Prints the posted jobs' uuids, one JSON list."""
import json
import sys

from taskflow.jobs.backends import impl_redis


def main():
    host, port, namespace, *pairs = sys.argv[1:]
    board = impl_redis.RedisJobBoard("images", {"host": host, "port": int(port), "namespace": namespace})
    board.connect()
    try:
        uuids = []
        for path, width in zip(pairs[0::2], pairs[1::2]):
            job = board.post("resize", details={"path": path, "width": int(width)})
            uuids.append(job.uuid)
        print(json.dumps(uuids))
    finally:
        board.close()


if __name__ == "__main__":
    main()
