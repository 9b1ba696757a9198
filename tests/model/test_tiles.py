"""The tile schedulers' assignment and wave model (model/tiles.py): properties over random shapes, tiles, SM counts,
occupancies and kinds, plus the CUTLASS sm90 heuristic restated on hand-computed rows."""
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_twill.errors import InputError
from tvm_twill.model.tiles import (KINDS, MIN_SK_ITERS, Problem, Unit, assign, auto_rule, cutlass_sm90_sk_tiles,
                                   raster, simulate, wave_model)


@st.composite
def cases(draw):
    tm, tn, tk = (draw(st.sampled_from([16, 32, 64, 128])) for _ in range(3))
    m = draw(st.integers(1, 24)) * tm - draw(st.integers(0, tm - 1))  # ragged last tile row or not
    n = draw(st.integers(1, 24)) * tn - draw(st.integers(0, tn - 1))
    k = draw(st.integers(1, 40)) * tk - draw(st.integers(0, tk - 1))
    p = Problem(max(m, 1), max(n, 1), max(k, 1), tm, tn, tk)
    return p, draw(st.integers(1, 40)), draw(st.integers(1, 4)), draw(st.sampled_from(KINDS))


def _covered(p, a):
    return Counter((u.tile, k) for units in a.units for u in units for k in range(u.k_begin, u.k_end))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases())
def test_every_tile_and_k_iteration_is_covered_exactly_once(case):
    p, sms, occ, kind = case
    a = assign(p, sms, occ, kind)
    got = _covered(p, a)
    assert set(got) == {(t, k) for t in range(p.tiles) for k in range(p.k_iters)}
    assert set(got.values()) == {1}
    assert all(u.k_begin < u.k_end for units in a.units for u in units)
    assert len(a.units) == a.grid


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases())
def test_one_finalizer_per_split_tile_and_waits_point_down_without_cycles(case):
    p, sms, occ, kind = case
    a = assign(p, sms, occ, kind)
    owners = defaultdict(set)
    for c, units in enumerate(a.units):
        for u in units:
            owners[u.tile].add(c)
    split = {t for t, cs in owners.items() if len(cs) > 1}
    if kind != "stream_k":
        assert not split and not a.waits and a.workspace_bytes == 0 and a.flags == 0
        return
    for t in split:  # the finalizer: the one CTA that runs the tile's last k-iteration, the highest contributor
        last = [c for c in owners[t] for u in a.units[c] if u.tile == t and u.k_end == p.k_iters]
        assert last == [a.finalizer[t]] == [max(owners[t])]
        assert {w for f, w, tt in a.waits if tt == t} == owners[t] - {a.finalizer[t]}
        assert all(f == a.finalizer[t] for f, _, tt in a.waits if tt == t)
    assert all(waited < waiter for waiter, waited, _ in a.waits)
    # one deep: a CTA that is waited on never waits before it writes its partial (its partial is its first unit)
    for _, w, t in a.waits:
        assert a.units[w][0].tile == t and a.units[w][0].k_end < p.k_iters


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases())
def test_stream_k_fits_the_resident_set_and_workspace_follows_the_formula(case):
    p, sms, occ, _ = case
    a = assign(p, sms, occ, "stream_k")
    assert a.sk_ctas <= a.grid <= sms * occ == a.resident
    assert a.workspace_bytes == a.sk_ctas * p.tile_m * p.tile_n * 4 and a.flags == a.sk_ctas
    writers = [w for _, w, _ in a.waits]
    assert len(writers) == len(set(writers)) and all(0 <= w < a.sk_ctas for w in writers)  # one slot per writer
    assert a.slots == {w: t for _, w, t in a.waits}
    full = p.tiles // a.resident
    assert a.sk_tiles == p.tiles - max(full - 1, 0) * a.resident  # at most two waves' worth of Stream-K tiles
    # the Stream-K tiles are the first linear ids; every later tile is whole on one CTA
    later = [u for units in a.units for u in units if u.tile >= a.sk_tiles]
    assert all(u.k_begin == 0 and u.k_end == p.k_iters for u in later)
    loads = [sum(u.k_end - u.k_begin for u in units if u.tile < a.sk_tiles) for units in a.units[:a.sk_ctas]]
    assert max(loads) - min(loads) <= 1  # divided evenly


@settings(max_examples=200, deadline=None, derandomize=True)
@given(cases())
def test_simulation_finishes_and_the_model_is_bounded(case):
    p, sms, occ, kind = case
    a = assign(p, sms, occ, kind)
    ends = simulate(p, a)
    work = p.tiles * p.k_iters
    assert len(ends) == a.grid and max(ends) >= work / a.resident - 1e-9
    w = wave_model(p, sms, occ)
    assert all(0 < e <= 1 + 1e-9 for e in w.efficiency.values())
    assert w.efficiency["data_parallel"] == pytest.approx(p.tiles / (w.waves * w.resident))
    assert w.efficiency["persistent"] == pytest.approx(w.efficiency["data_parallel"])
    assert w.tail_tiles == p.tiles - (w.waves - 1) * w.resident and 0 < w.tail_tiles <= w.resident
    sk = assign(p, sms, occ, "stream_k")
    assert (w.sk_tiles, w.sk_workspace_bytes, w.sk_flags) == (sk.sk_tiles, sk.workspace_bytes, sk.flags)
    assert w.fixup_bytes == 2 * len(sk.waits) * p.tile_m * p.tile_n * 4  # each partial written once, read once
    assert w.choice in KINDS


def test_simulation_refuses_a_wait_on_a_higher_cta():
    p = Problem(128, 128, 64 * 16)
    a = assign(p, 4, 1, "stream_k")
    bad = type(a)(a.kind, a.grid, a.resident, a.units, a.sk_tiles, a.sk_ctas, a.finalizer,
                  ((0, 1, 0),), a.slots, a.workspace_bytes, a.flags)
    with pytest.raises(InputError, match="not a lower id"):
        simulate(p, bad)


def test_stream_k_assignment_by_hand():
    # 1 tile x 16 k-iterations on 4 SMs: CTAs 0..3 take 4 each; CTA 3 runs the last k-iterations and finalizes
    p = Problem(128, 128, 16 * 64)
    a = assign(p, 4, 1, "stream_k")
    assert a.units == ((Unit(0, 0, 4),), (Unit(0, 4, 8),), (Unit(0, 8, 12),), (Unit(0, 12, 16),))
    assert a.finalizer == {0: 3} and sorted(a.waits) == [(3, 0, 0), (3, 1, 0), (3, 2, 0)]
    assert a.workspace_bytes == 4 * 128 * 128 * 4 and a.flags == 4
    # 3 tiles x 4 k-iterations on 2 CTAs: 6 each; CTA 0 runs tile 0 and half of tile 1 (the partial first)
    a = assign(Problem(384, 128, 256), 2, 1, "stream_k")
    assert a.units[0] == (Unit(1, 0, 2), Unit(0, 0, 4)) and a.units[1] == (Unit(2, 0, 4), Unit(1, 2, 4))
    assert a.waits == ((1, 0, 1),)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(1, 12), st.sampled_from(["m", "n"]))
def test_raster_is_a_bijection_with_panels(tm, tn, group, along):
    coords = [raster(t, tm, tn, group, along) for t in range(tm * tn)]
    assert sorted(coords) == [(i, j) for i in range(tm) for j in range(tn)]
    axis = 0 if along == "m" else 1
    per = group * (tn if along == "m" else tm)
    for t, c in enumerate(coords):  # tile t lies in panel t // per: rows (columns) group*panel .. +group-1
        assert c[axis] // group == t // per
    if group == 1 and along == "m":
        assert coords == [(i, j) for i in range(tm) for j in range(tn)]


def test_raster_ragged_last_panel_by_hand():
    # 5 rows x 2 columns, panels of 2 rows: (0,0) (1,0) (0,1) (1,1) | (2,0) (3,0) (2,1) (3,1) | (4,0) (4,1)
    assert [raster(t, 5, 2, 2) for t in range(10)] == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1),
                                                       (3, 1), (4, 0), (4, 1)]
    assert raster(3, 2, 5, 2, "n") == (1, 1)


def test_bad_input_is_one_line():
    for call, text in ((lambda: assign(Problem(8, 8, 8), 0, 1, "persistent"), "sm_count must be a positive"),
                       (lambda: assign(Problem(8, 8, 8), 1, 1, "split_k"), "unknown kind 'split_k'"),
                       (lambda: Problem(0, 8, 8), "m must be a positive"),
                       (lambda: raster(0, 2, 2, 2, "k"), "along must be"),
                       (lambda: raster(4, 2, 2), "outside 0..3")):
        with pytest.raises(InputError, match=text) as err:
            call()
        assert "\n" not in str(err.value)


# the table: 132 SMs, 128x128x64 tiles; the first three have a short tail wave, the last two ~97% waves
TABLE = [((1024, 1024, 16384), "stream_k", 64), ((1536, 1536, 8192), "stream_k", 144),
         ((2304, 2304, 4096), "stream_k", 192), ((4096, 4096, 4096), "persistent", 0),
         ((2048, 2048, 8192), "persistent", 0)]


@pytest.mark.parametrize("shape,choice,cutlass_sk", TABLE)
def test_auto_on_the_table_and_cutlass_sm90(shape, choice, cutlass_sk):
    p = Problem(*shape)
    w = wave_model(p, 132)
    assert w.choice == choice
    assert cutlass_sm90_sk_tiles(p.tiles, 132, p.k_iters) == cutlass_sk
    assert (w.choice == "stream_k") == (cutlass_sk > 0)  # the two rules agree on every row of the table
    if choice == "stream_k":
        assert w.sk_tiles == cutlass_sk  # the same hybrid: Stream-K over the last two waves' worth of tiles


def test_cutlass_heuristic_by_hand_and_where_the_rules_differ():
    assert cutlass_sm90_sk_tiles(264, 132, 64) == 0  # no tail
    assert cutlass_sm90_sk_tiles(140, 132, MIN_SK_ITERS) == 0  # too few k-iterations
    assert cutlass_sm90_sk_tiles(200, 132, 64) == 0  # tail 68 >= half a wave
    assert cutlass_sm90_sk_tiles(140, 132, 64) == 140 and cutlass_sm90_sk_tiles(400, 132, 64) == 400 - 2 * 132
    # 1.5 waves: CUTLASS keeps data-parallel (tail >= half a wave); the wave model sees 75% -> ~97% and picks SK
    p = Problem(198 * 128, 128, 4096)
    assert cutlass_sm90_sk_tiles(p.tiles, 132, p.k_iters) == 0 and wave_model(p, 132).choice == "stream_k"
    # a small tail after many waves: CUTLASS picks SK; the gain is under SK_MARGIN here
    p = Problem(3970 * 128, 128, 4096)
    assert cutlass_sm90_sk_tiles(p.tiles, 132, p.k_iters) > 0 and wave_model(p, 132).choice == "persistent"


def test_auto_rule_branches():
    p = Problem(128 * 10, 128, 4096)
    assert auto_rule(p, 132, {"data_parallel": 0.1, "stream_k": 0.9})[0] == "stream_k"
    assert auto_rule(p, 132, {"data_parallel": 0.1, "stream_k": 0.12})[0] == "data_parallel"
    assert auto_rule(p, 4, {"data_parallel": 0.8, "stream_k": 0.82})[0] == "persistent"
    assert auto_rule(Problem(128 * 10, 128, 64 * MIN_SK_ITERS), 132,
                     {"data_parallel": 0.1, "stream_k": 0.9})[0] == "data_parallel"
