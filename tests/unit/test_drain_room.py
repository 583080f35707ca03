"""compute drain's room check: do a host's servers fit on the others, by placement's figures?"""
from kolla_salt.operations.compute import describe, free_room, unplaced


def inventory(total, reserved=0, ratio=1.0, max_unit=None):
    return {"total": total, "reserved": reserved, "allocation_ratio": ratio, "max_unit": max_unit or total}


def test_free_room_is_total_less_reserved_times_the_ratio_less_what_is_used():
    room = free_room({"VCPU": inventory(2, ratio=4.0), "MEMORY_MB": inventory(4096, reserved=512, ratio=1.5)},
                     {"VCPU": 3, "MEMORY_MB": 1000})
    assert room == {"VCPU": (5, 2), "MEMORY_MB": (4376, 4096)}


def test_servers_that_fit_are_placed_and_take_their_room():
    room = {"host3": {"VCPU": (2, 2), "MEMORY_MB": (256, 4096)}}
    small = {"VCPU": 1, "MEMORY_MB": 128}
    assert unplaced([("a", small), ("b", small)], room) == []
    # The third no longer fits: the first two took the room.
    assert unplaced([("a", small), ("b", small), ("c", small)], room) == ["c"]


def test_a_server_is_placed_on_any_host_with_room_for_every_class():
    room = {"host2": {"VCPU": (0, 2), "MEMORY_MB": (4096, 4096)}, "host3": {"VCPU": (1, 2), "MEMORY_MB": (512, 4096)}}
    assert unplaced([("a", {"VCPU": 1, "MEMORY_MB": 256})], room) == []
    assert unplaced([("a", {"VCPU": 1, "MEMORY_MB": 1024})], room) == ["a"]


def test_no_amount_above_max_unit_and_no_class_the_host_lacks():
    room = {"host3": {"VCPU": (8, 2), "MEMORY_MB": (4096, 4096)}}
    assert unplaced([("big", {"VCPU": 4})], room) == ["big"]
    assert unplaced([("gpu", {"VCPU": 1, "VGPU": 1})], room) == ["gpu"]


def test_no_other_host_leaves_every_server_unplaced():
    assert unplaced([("a", {"VCPU": 1}), ("b", {"VCPU": 1})], {}) == ["a", "b"]


def test_the_largest_memory_is_placed_first():
    room = {"host3": {"MEMORY_MB": (1024, 4096)}, "host4": {"MEMORY_MB": (512, 4096)}}
    # In the given order a 512 MB server would take host3's room and the 1024 MB one fit nowhere.
    assert unplaced([("small", {"MEMORY_MB": 512}), ("large", {"MEMORY_MB": 1024})], room) == []


def test_an_allocation_is_described_in_the_operator_s_units():
    assert describe({"VCPU": 1, "MEMORY_MB": 128, "DISK_GB": 1}) == "1 VCPU, 128 MB, 1 GB"
