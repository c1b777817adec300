"""On-demand profiling across fleet gateways: two gateways on one PostgreSQL catalog and one S3
server, spoken to over real HTTP. A trace uploaded to one is read, byte for byte, through the
other, the dashboard's reader and the CLI; polls and uploads racing on both gateways hand out and
settle a request exactly as one server would; a refused trace leaves nothing stored."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pyarrow.fs import FileSelector
from sqlalchemy import func, select

from app.cli import main
from dashboard import data
from fleetscope.settings import Settings
from tests.fleet.conftest import s3_filesystem, wait_until
from tests.warehouse.test_profiling_api import TRACE, call, poll
from warehouse.catalog.profiling import traces
from warehouse.fleet.gateway import Gateway
from warehouse.profiling.trace_backend import trace_storage, traces_dir

ROUNDS = 12  # each race is run this many times; every round must come out exactly the same
LIMIT = 64 * 1024


@pytest.fixture
def settings(fleet_settings: Settings) -> Settings:
    return fleet_settings.with_overrides(server__max_body_bytes=LIMIT)


@pytest.fixture
def gateways(settings: Settings, tmp_path: Path) -> Iterator[tuple[Gateway, Gateway]]:
    """Gateways A and B, each with its own data folder (no local disk is shared)."""
    a = Gateway(settings.with_overrides(core__data_dir=str(tmp_path / "gw-a")))
    b = Gateway(settings.with_overrides(core__data_dir=str(tmp_path / "gw-b")))
    a.start()
    b.start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls on threads released together; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def proc(pid: int, job: str, rank: int | None = 0) -> dict[str, Any]:
    return {"pid": pid, "job_id": job, "rank": rank}


def create(gw: Gateway, job: str, **fields: Any) -> int:
    status, answer = call(gw, "POST", "/v1/profile-requests", {"job_id": job, **fields})
    assert status == 201, answer
    return int(answer["id"])


def upload(gw: Gateway, request_id: int, host: str, pid: int, body: bytes) -> tuple[int, Any]:
    path = f"/v1/traces?request_id={request_id}&host={host}&rank=0&pid={pid}"
    return call(gw, "POST", path, body)


def request_state(gw: Gateway, request_id: int) -> dict[str, Any]:
    status, answer = call(gw, "GET", f"/v1/profile-requests/{request_id}")
    assert status == 200, answer
    return answer


def settled(gw: Gateway, request_id: int) -> dict[str, Any]:
    wait_until(
        lambda: request_state(gw, request_id)["state"] in ("done", "failed"),
        30,
        f"profile request {request_id} settled",
    )
    return request_state(gw, request_id)


def stored_objects(gw: Gateway) -> list[str]:
    fs = s3_filesystem(gw.config)
    prefix = gw.config.warehouse_uri.removeprefix("s3://") + "/traces"
    infos = fs.get_file_info(FileSelector(prefix, recursive=True, allow_not_found=True))
    return sorted(i.path.rsplit("/", 1)[-1] for i in infos)


def test_a_trace_uploaded_to_one_gateway_is_read_through_the_other_the_dashboard_and_the_cli(
    gateways: tuple[Gateway, Gateway], settings: Settings, tmp_path: Path
) -> None:
    a, b = gateways
    poll(b, "node-a", [proc(77, "train-9")])
    request_id = create(a, "train-9")
    assert poll(b, "node-a", [proc(77, "train-9")])["requests"][0]["pids"] == [77]
    body = TRACE.read_bytes()

    status, stored = upload(a, request_id, "node-a", 77, body)

    trace_id = f"req{request_id}-node-a-pid77"
    location = f"s3://fleetscope-test/warehouse/traces/{trace_id}.pt.trace.json.gz"
    assert (status, stored) == (201, {"trace_id": trace_id, "path": location})
    request = settled(b, request_id)
    assert request["state"] == "done"
    assert [(t["trace_id"], t["path"]) for t in request["traces"]] == [(trace_id, location)]
    assert b.profiling.storage.read_bytes(trace_id) == body
    fs = s3_filesystem(a.config)  # the object as any S3 client sees it: the trace file as sent
    with fs.open_input_stream(location.removeprefix("s3://"), compression=None) as raw:
        assert raw.read() == body
    assert not (tmp_path / "gw-a" / "traces").exists()  # nothing on the receiving gateway's disk

    reader = settings.with_overrides(core__data_dir=str(tmp_path / "dashboard-host"))
    storage = trace_storage(reader)
    listed = data.trace_list(data.catalog_table(b.catalog, "traces"), storage, traces_dir(reader))
    assert listed[["trace_id", "path"]].values.tolist() == [[trace_id, location]]
    assert listed["size_mib"].tolist() == [len(body) / 2**20]
    assert storage.local_path(trace_id).read_bytes() == body  # what the trace page opens

    config = tmp_path / "cli.toml"
    config.write_text(
        f'[core]\ndata_dir = "{tmp_path / "cli-host"}"\n'
        f'[server]\nmode = "fleet"\n'
        f'[warehouse]\ncatalog_url = "{settings.warehouse.catalog_url}"\n'
        f'[fleet]\nwarehouse_uri = "{settings.fleet.warehouse_uri}"\n'
        f's3_endpoint = "{settings.fleet.s3_endpoint}"\n'
        f's3_access_key = "test"\ns3_secret_key = "test"\n'
    )
    out = tmp_path / "fetched"
    assert main(["--config", str(config), "trace", "fetch", trace_id, "--dir", str(out)]) == 0
    assert (out / f"{trace_id}.pt.trace.json.gz").read_bytes() == body


def test_one_host_polling_both_gateways_at_once_is_handed_a_request_once(
    gateways: tuple[Gateway, Gateway],
) -> None:
    a, b = gateways
    for n in range(ROUNDS):
        job, procs = f"train-{n}", [proc(10, f"train-{n}"), proc(11, f"train-{n}", 1)]
        poll(a, "node-a", procs)
        request_id = create(b, job)
        answers = at_once(partial(poll, a, "node-a", procs), partial(poll, b, "node-a", procs))
        handed = [r for answer in answers for r in answer["requests"]]
        assert [(r["request_id"], r["pids"]) for r in handed] == [(request_id, [10, 11])], n
        assert [(e["host"], e["pid"]) for e in request_state(a, request_id)["matched"]] == [
            ("node-a", 10),
            ("node-a", 11),
        ]


def test_a_rank_is_handed_to_one_host_and_a_rankless_request_to_every_host_racing(
    gateways: tuple[Gateway, Gateway],
) -> None:
    a, b = gateways
    for n in range(ROUNDS):
        job = f"train-{n}"
        poll(a, "node-a", [proc(10, job)])
        poll(b, "node-b", [proc(20, job)])
        ranked = create(a, job, rank=0)
        answers = at_once(
            partial(poll, a, "node-a", [proc(10, job)]), partial(poll, b, "node-b", [proc(20, job)])
        )
        assert sum(len(answer["requests"]) for answer in answers) == 1, n
        assert len(request_state(b, ranked)["matched"]) == 1

        rankless = create(b, job)
        answers = at_once(
            partial(poll, b, "node-a", [proc(10, job)]), partial(poll, a, "node-b", [proc(20, job)])
        )
        assert [[r["pids"] for r in answer["requests"]] for answer in answers] == [[[10]], [[20]]]
        matched = request_state(a, rankless)["matched"]
        assert sorted((e["host"], e["pid"]) for e in matched) == [("node-a", 10), ("node-b", 20)]


def test_uploads_racing_on_both_gateways_are_all_kept_and_a_copy_is_refused(
    gateways: tuple[Gateway, Gateway],
) -> None:
    a, b = gateways
    body = TRACE.read_bytes()
    for n in range(ROUNDS):
        job = f"train-{n}"
        poll(a, "node-a", [proc(10, job)])
        request_id = create(a, job)
        poll(a, "node-a", [proc(10, job), proc(11, job, 1)])
        poll(b, "node-b", [proc(20, job)])

        copies = at_once(
            partial(upload, a, request_id, "node-a", 10, body),
            partial(upload, b, request_id, "node-a", 10, body),
        )
        assert sorted(status for status, _ in copies) == [201, 409], (n, copies)
        others = at_once(
            partial(upload, b, request_id, "node-a", 11, body),
            partial(upload, a, request_id, "node-b", 20, body),
        )
        assert [status for status, _ in others] == [201, 201], (n, others)

        request = settled(b, request_id)
        assert request["state"] == "done"
        assert sorted((e["host"], e["pid"], e["state"]) for e in request["matched"]) == [
            ("node-a", 10, "done"),
            ("node-a", 11, "done"),
            ("node-b", 20, "done"),
        ]
        assert len(request["traces"]) == 3
    assert len(stored_objects(a)) == 3 * ROUNDS


def test_a_corrupt_a_bomb_or_an_oversized_trace_is_refused_and_nothing_is_stored(
    gateways: tuple[Gateway, Gateway],
) -> None:
    a, b = gateways
    procs = [proc(10, "train-1"), proc(11, "train-1", 1), proc(12, "train-1", 2)]
    poll(a, "node-a", procs)
    request_id = create(a, "train-1")
    poll(b, "node-a", procs)
    whole = TRACE.read_bytes()
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (LIMIT * 200) + b"]}")
    assert len(bomb) < LIMIT

    truncated = upload(a, request_id, "node-a", 10, whole[: len(whole) // 2])
    inflating = upload(b, request_id, "node-a", 11, bomb)
    oversized = upload(a, request_id, "node-a", 12, whole * 3)

    assert truncated[0] == 400 and "corrupt trace" in truncated[1]["error"]
    assert inflating[0] == 400 and "inflates past 64x" in inflating[1]["error"]
    assert oversized[0] == 413
    request = request_state(b, request_id)
    assert request["state"] == "failed"
    assert [e["state"] for e in request["matched"]] == ["failed", "failed", "failed"]
    assert stored_objects(a) == []
    with b.catalog.connect() as conn:
        assert conn.execute(select(func.count()).select_from(traces)).scalar() == 0
