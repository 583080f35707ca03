"""The upgrade-path rule: N -> N+1, SLURP .1 -> next .1; jumps and downgrades named."""
import pytest

from kolla_salt.declaration.releases import base_move_problems, load_releases, skew_problems, upgrade_path_problem

RELEASES = {"zed": {"series": "2022.2"}, "2023.1": {"series": "2023.1 (antelope)"},
            "2024.1": {"series": "2024.1 (caracal)"}, "2025.1": {"series": "2025.1 (epoxy)"},
            "2025.2": {"series": "2025.2 (flamingo)"}, "2026.1": {"series": "2026.1 (gazpacho)"},
            "2026.2": {"series": "2026.2"}}


@pytest.mark.parametrize("old, new", [
    ("2025.1", "2025.2"), ("2025.2", "2026.1"), ("zed", "2023.1"),   # N -> N+1 across a year
    ("2025.1", "2026.1"), ("2024.1", "2025.1"),                        # SLURP
    ("2026.1", "2026.1"),                                              # no change
])
def test_supported_upgrades_pass(old, new):
    assert upgrade_path_problem(RELEASES, old, new) is None


@pytest.mark.parametrize("old, new, why", [
    ("zed", "2026.1", "skips releases"),        # the default of old to today's: four releases at once
    ("2025.2", "2026.2", "skips releases"),     # .2 -> next .2 is not a SLURP
    ("2025.1", "2026.2", "skips releases"),
    ("2026.1", "2025.2", "is a downgrade"),
    ("2026.1", "zed", "is a downgrade"),
])
def test_jumps_and_downgrades_are_named(old, new, why):
    problem = upgrade_path_problem(RELEASES, old, new)
    assert problem.startswith(f"{old} -> {new} {why}")


def test_every_known_release_has_a_series():
    releases = load_releases()
    names = list(releases)
    for old, new in zip(names, names[1:]):   # oldest first: the table is ordered
        assert upgrade_path_problem(releases, new, old).endswith(f"`kolla-salt rollback --release {old}`)")


def service(name, release, *containers, pinned=()):
    return {"name": name, "release": release,
            "containers": [{"spec": {"name": c}, "pin": 1 if c in pinned else None} for c in containers]}


def test_a_jump_on_any_host_is_refused_naming_that_host():
    """Through a master each host's running releases come from its facts."""
    from kolla_salt.declaration.preflight import check_release_paths
    from kolla_salt.errors import ValidationError
    hosts = {"host1": ([service("keystone", "2026.1", "keystone")], {"keystone": "2026.1"}),
             "host2": ([service("keystone", "2026.1", "keystone")], {"keystone": "2026.2"}),
             "host3": ([service("keystone", "2026.1", "keystone", pinned=("keystone",))], {"keystone": "2026.2"})}
    with pytest.raises(ValidationError) as error:
        check_release_paths(hosts, allow_jump=False)
    assert error.value.problems[0] == ("host2: keystone: runs 2026.2, declared 2026.1: 2026.2 -> 2026.1 is a "
                                       "downgrade: database schemas only migrate forward (to go back with the "
                                       "data, `kolla-salt rollback --release 2026.1`)")
    assert len(error.value.problems) == 2   # host3's container is held at a generation: not a change
    check_release_paths(hosts, allow_jump=True)   # reported, not refused


@pytest.mark.parametrize("compute, control, problem", [
    ("2026.1", "2026.1", None),
    ("2025.2", "2026.1", None),                       # one release behind
    ("2025.1", "2026.1", None),                       # SLURP: nova supports computes a .1 behind
    ("2026.2", "2026.1", "nova_compute would run 2026.2, newer than nova at 2026.1"),
    ("2025.1", "2026.2", "nova_compute would run 2025.1, more than one release behind nova at 2026.2"),
])
def test_a_compute_newer_than_novas_control_services_or_too_far_behind_is_refused(compute, control, problem):
    problems = skew_problems(RELEASES, {"nova": control, "nova_compute": compute, "keystone": "2026.2"},
                             {"nova_compute": "nova"})
    assert problems == ([] if problem is None else [problems[0]])
    if problem:
        assert problems[0].startswith(problem) and "runs_behind" in problems[0]
        assert ("upgrade nova to 2026.2 first" if compute > control else "upgrade nova_compute first") in problems[0]


def test_a_pin_that_puts_nova_compute_ahead_of_nova_is_refused_before_anything_changes(tmp_path):
    """The rule is the nova_compute folder's (runs_behind: nova), checked for every
    pillar (deploy, upgrade, a master's placement, what an upgrade on one host
    declares), whichever hosts run the two."""
    import yaml
    from kolla_salt.declaration.inventory import build_pillar
    from kolla_salt.declaration.roles import placement
    from kolla_salt.errors import ValidationError
    from test_loadbalancer import operator_folder
    operator_folder(tmp_path, enable_nova=True, enable_nova_compute=True, enable_libvirt=True)
    (tmp_path / "pins.yml").write_text(yaml.safe_dump({"services": {"nova_compute": {"release": "2026.2"}}}))
    from kolla_salt.declaration.pins import load_pins
    from kolla_salt.declaration.roles import declared_services
    from kolla_salt.declaration.settings import load_settings
    for build in (lambda: build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]}), lambda: placement(tmp_path),
                  lambda: declared_services(load_settings(tmp_path), load_pins(tmp_path), "local")):
        with pytest.raises(ValidationError, match=r"nova_compute would run 2026.2, newer than nova at 2026.1: "
                                                  r"nova_compute runs at most one release behind nova"):
            build()
    (tmp_path / "pins.yml").write_text(yaml.safe_dump({"services": {"nova": {"release": "2026.2"}}}))
    assert placement(tmp_path)   # control services first: computes one release behind are fine


def test_releases_lists_those_whose_whole_cloud_is_proven_and_all_says_what_is_proven_of_each():
    import subprocess
    import sys
    listed = subprocess.run([sys.executable, "-m", "kolla_salt.cli", "releases"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    releases = load_releases()
    assert [line.split("\t")[0] for line in listed] == [name for name, r in releases.items() if r.get("cloud")]
    assert {"2026.1", "2026.2"} <= {line.split("\t")[0] for line in listed}
    every = subprocess.run([sys.executable, "-m", "kolla_salt.cli", "releases", "--all"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert [line.split("\t")[0] for line in every] == list(releases)
    for line in every:   # the bases each builds on, the default first, and those the suite proves
        release = releases[line.split("\t")[0]]
        assert line.split("\t")[3] == "debian " + ", ".join(release["bases"])
        proven = release.get("cloud")
        assert line.endswith(f"whole cloud on {', '.join(proven)}" if proven else "not the whole cloud"), line
    assert "2026.1\t2026.1 (gazpacho)\tsource\tdebian trixie, bookworm\t" in "\n".join(every)


def test_only_a_service_whose_folder_says_it_cannot_cross_bases_by_a_swap_is_refused_on_another_base():
    """RabbitMQ's folder says why it cannot cross to another base by a swap: its
    container on another base is refused before anything changes, naming it, both
    bases, the reason and the command that holds it; keystone and memcached cross by
    their swaps; a held container passes."""
    why = "RabbitMQ upgrades one minor at a time"
    services = [{"name": "rabbitmq", "base": "debian-trixie", "base_move": why,
                 "containers": [{"spec": {"name": "rabbitmq"}, "pin": None}]},
                {"name": "mariadb", "base": "debian-trixie", "base_move": "one LTS at a time",
                 "containers": [{"spec": {"name": "mariadb"}, "pin": 3}]},
                {"name": "keystone", "base": "debian-trixie", "base_move": None,
                 "containers": [{"spec": {"name": "keystone"}, "pin": None}]},
                {"name": "memcached", "base": "debian-trixie",
                 "containers": [{"spec": {"name": "memcached"}, "pin": None}]}]
    running = {"rabbitmq": "debian-bookworm", "mariadb": "debian-bookworm", "keystone": "debian-bookworm",
               "memcached": "debian-trixie"}
    assert base_move_problems(services, running, "host1") == [
        f"host1: rabbitmq: rabbitmq runs on debian-bookworm images, declared debian-trixie: {why}; "
        "`kolla-salt upgrade --base trixie` holds it on bookworm (pins.yml) while the rest moves"]
    assert base_move_problems(services, {}) == []   # nothing runs yet: a first deploy


def test_an_images_versions_make_its_releases_source_versions_and_an_unknown_release_is_refused(tmp_path,
                                                                                                monkeypatch):
    """A release's source versions are its image folders' (image.yml `versions`); an
    image that names a release the table does not know is refused naming its file."""
    from kolla_salt import paths
    from kolla_salt.errors import ValidationError
    releases = load_releases()
    assert releases["2026.1"]["source"]["keystone"] == "29.0.0" and "source" not in releases["zed"]
    assert releases["2025.1"]["libraries"] == {"neutron": ["neutron-lib<4"]}
    (tmp_path / "memo").mkdir()
    (tmp_path / "memo" / "image.yml").write_text('parent: base\nversions: {"2026.1": "1.0", "2031.1": "9.0"}\n')
    (tmp_path / "memo" / "Dockerfile.j2").write_text("FROM {{ parent_image }}\n")
    monkeypatch.setattr(paths, "IMAGES_DIR", tmp_path)
    with pytest.raises(ValidationError) as refused:
        load_releases()
    assert refused.value.problems == [f"{tmp_path / 'memo' / 'image.yml'}: key 'versions.2031.1' is not a release "
                                      f"of pillar/defaults/releases.yml ({', '.join(releases)})"]


def test_what_a_declaration_names_comes_from_the_folders_alone_as_its_pillar_holds_it(tmp_path):
    """An upgrade on one host reads its declaration's services (their sets, releases,
    containers with their images and pins, their jobs' images, the volumes they fill)
    without compiling the pillar: the same as the pillar holds, a pinned release and
    a held container included."""
    import yaml
    from kolla_salt.declaration.inventory import build_pillar, service_specs
    from kolla_salt.declaration.pins import load_pins
    from kolla_salt.declaration.roles import declared_services
    from kolla_salt.declaration.settings import load_settings
    from test_loadbalancer import operator_folder
    operator_folder(tmp_path, enable_nova=True, enable_nova_compute=True, enable_libvirt=True,
                    enable_neutron=True, enable_openvswitch=True, enable_ovn=True)
    (tmp_path / "pins.yml").write_text(yaml.safe_dump(
        {"services": {"glance": {"release": "2026.2"}}, "containers": {"t-keystone": {"generation": 2}}}))
    pillar = build_pillar(tmp_path, interfaces={"lo": ["127.0.0.1"]})["kolla"]["services"]

    def outline(services):
        return [(s["name"], s["set"], s["release"], [(c["spec"]["name"], c["spec"]["image"], c["pin"])
                                                     for c in s["containers"]],
                 sorted((spec["name"], spec["image"]) for spec in service_specs(s)), s["fills"]) for s in services]
    declared = declared_services(load_settings(tmp_path), load_pins(tmp_path), "local")
    assert outline(declared) == outline(pillar)
    assert {s["name"]: s["release"] for s in declared}["glance"] == "2026.2"
