"""Fleet mode's window parts look back as embedded windows do (issue 31): a cluster's part of a
UTC day also reads the rules' look-back from the day before (R3: its 120 min), so an allocated GPU
idle since 50 min before midnight gets R3 in the new day's part once its 60 min have passed, as in
embedded mode (tests/analyzers/test_live_midnight.py), and the part's gpu_util sketch still holds
its window's samples only. Real gateway, Iceberg tables on the test S3 server, PostgreSQL catalog."""

from __future__ import annotations

import base64
from datetime import timedelta

from analyzers.run.fleet_window import analyze_part
from analyzers.run.results import CatalogJobs
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from analyzers.sketch.core import QuantileSketch
from fleetscope.settings import Settings
from simulator.maker.series import T0, Fleet
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed
from warehouse import catalog
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.tables import FleetConfig, FleetTables

IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}
MIDNIGHT = T0 + timedelta(days=1)


def test_a_clusters_part_sees_an_idle_stretch_begun_the_day_before(
    gateway: Gateway, fleet_settings: Settings
) -> None:
    # idle from 23:10 to 00:15 UTC: 50 min before midnight, 65 min in all
    samples = Fleet().gpus("idle", "h1", [0], 24 * 60 - 50, 65, **IDLE).tables()["gpu_samples"]
    samples = samples.set_column(1, "cluster", [["east"] * samples.num_rows])
    assert post_batch(gateway.url, "gpu_samples", samples, token=TEST_TOKEN).status == 202
    landed(gateway)

    tables = FleetTables(FleetConfig.from_settings(fleet_settings))
    jobs = CatalogJobs(catalog.connect(fleet_settings.warehouse.catalog_url))
    window = Window(MIDNIGHT, MIDNIGHT + timedelta(days=1))
    answer = analyze_part(tables, Pipeline.from_settings(fleet_settings), jobs, window, "east")

    found = answer["part"]["findings"]  # analyzer -> its findings
    rules = {f["rule_id"] for per_analyzer in found.values() for f in per_analyzer}
    assert "R3" in rules  # only 15 idle minutes lie inside the window: R3 needs the look-back
    sketch = QuantileSketch.from_bytes(base64.b64decode(answer["gpu_util_sketch"]))
    after_midnight = sum(1 for t in samples.column("ts").to_pylist() if t >= MIDNIGHT)
    assert sketch.count == after_midnight  # the look-back's samples are read, not sketched
