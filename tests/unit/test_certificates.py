"""TLS on haproxy's VIPs: the certificates `kolla-salt certificates` makes, the checks
a deploy makes of the operator's, and what the pillar does with them."""
import datetime
import json
import os
import shutil

import pytest
import yaml

from kolla_salt.declaration.inventory import build_pillar
from kolla_salt.errors import ValidationError
from kolla_salt.operations import certificates
from operator_files import write_secrets

NAMES = ["cloud.example.test", "127.0.0.11"]
TLS = {"kolla_enable_tls_external": True, "kolla_external_vip_address": "127.0.0.11",
       "kolla_external_fqdn": "cloud.example.test"}


INTERNAL_TLS = {"kolla_enable_tls_internal": True, "kolla_copy_ca_into_containers": True}


def made(folder, names=NAMES, days=30, pem=certificates.EXTERNAL.pem):
    certificates.make(folder, {pem: names}, days, out=lambda m: None)
    return folder


def problems(folder, names=NAMES, now=None):
    with pytest.raises(ValidationError) as error:
        certificates.check(folder, certificates.EXTERNAL, names, now=now)
    return "\n".join(error.value.problems)


def test_made_certificates_check_out_and_are_private(tmp_path):
    pem, expiry = certificates.check(made(tmp_path), certificates.EXTERNAL, NAMES)
    assert "PRIVATE KEY" in pem and pem.count("BEGIN CERTIFICATE") == 2   # its chain: itself, the CA
    assert 29 <= (expiry - datetime.datetime.now(datetime.timezone.utc)).days <= 30
    assert certificates.expiring(expiry)                                  # within 30 days: renew
    for path in (certificates.EXTERNAL.pem, certificates.CA_CERT, certificates.CA_KEY):
        assert (tmp_path / path).stat().st_mode & 0o777 == 0o600
    ca = (tmp_path / certificates.CA_CERT).read_bytes()
    made(tmp_path)                                                        # a new certificate, the same CA
    assert (tmp_path / certificates.CA_CERT).read_bytes() == ca


def test_a_certificate_that_does_not_fit_is_refused_naming_the_file(tmp_path):
    path = tmp_path / certificates.EXTERNAL.pem
    assert f"{path}: no such file" in problems(tmp_path)
    made(tmp_path, names=["other.example.test"])
    assert (f"{path}: does not cover cloud.example.test, 127.0.0.11 (kolla_external_fqdn, "
            f"kolla_external_vip_address)") in problems(tmp_path)
    made(tmp_path)
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=31)
    assert f"{path}: valid from" in problems(tmp_path, now=later)
    # Another CA's certificate beside this CA, and a key of another certificate.
    other = made(tmp_path / "other")
    shutil.copy(other / certificates.EXTERNAL.pem, path)
    assert f"{path}: not signed by {tmp_path / certificates.CA_CERT}" in problems(tmp_path)
    blocks = certificates._pem_blocks(path.read_bytes())
    made(tmp_path)
    mine = certificates._pem_blocks(path.read_bytes())
    path.write_bytes(mine[0] + mine[1] + blocks[2])
    assert f"{path}: its private key does not belong to its certificate" in problems(tmp_path)
    path.write_text("not a certificate")
    assert f"{path}: expected PEM certificates" in problems(tmp_path)


def pillar(folder, settings, host="local"):
    write_secrets(folder)
    (folder / "globals.yml").write_text(yaml.safe_dump(settings))
    return build_pillar(folder, host, interfaces={"lo": ["127.0.0.1"]})["kolla"]


def test_with_tls_haproxy_serves_the_certificate_on_the_external_vip_and_the_catalog_is_https(tmp_path):
    made(tmp_path / "certificates")
    kolla = pillar(tmp_path, TLS)
    haproxy = next(s for s in kolla["services"] if s["name"] == "haproxy")["containers"][0]["files"]
    assert "bind 127.0.0.11:9292 ssl crt /etc/haproxy/certificates/haproxy.pem" in haproxy["haproxy.cfg"]
    assert "bind 127.0.0.10:9292\n" in haproxy["haproxy.cfg"]             # the internal VIP stays plain
    assert haproxy["haproxy.pem"] == (tmp_path / "certificates" / certificates.EXTERNAL.pem).read_text()
    assert kolla["passwords"]["haproxy_external_pem"] == haproxy["haproxy.pem"]   # blanked out of output
    jobs = {j["name"]: j for s in kolla["services"] for j in s["jobs"]}
    [glance] = json.loads(jobs["glance_keystone_register"]["environment"]["KOLLA_REGISTRATION"])["services"]
    assert glance["endpoints"] == {"public": "https://cloud.example.test:9292", "internal": "http://127.0.0.10:9292",
                                   "admin": "http://127.0.0.10:9292"}
    assert "https://cloud.example.test:5000/v3" in jobs["keystone_bootstrap"]["command"]
    # horizon: HTTPS on its TLS port of the external VIP, plain HTTP there redirected to it.
    kolla = pillar(tmp_path, {**TLS, "enable_horizon": True})
    haproxy = next(s for s in kolla["services"] if s["name"] == "haproxy")["containers"][0]["files"]["haproxy.cfg"]
    assert "bind 127.0.0.11:443 ssl crt /etc/haproxy/certificates/haproxy.pem" in haproxy
    assert ("frontend horizon_redirect\n    bind 127.0.0.11:80\n"
            "    http-request redirect prefix https://cloud.example.test code 301") in haproxy
    # Without TLS: no certificate anywhere, the public endpoints are the internal ones.
    kolla = pillar(tmp_path, {})
    haproxy = next(s for s in kolla["services"] if s["name"] == "haproxy")["containers"][0]["files"]
    assert "ssl" not in haproxy["haproxy.cfg"] and "haproxy.pem" not in haproxy
    assert "haproxy_external_pem" not in kolla["passwords"]


def test_bad_tls_settings_are_refused_naming_the_key(tmp_path):
    def refused(settings):
        with pytest.raises(ValidationError) as error:
            pillar(tmp_path, settings)
        return "\n".join(error.value.problems)

    globals_file = tmp_path / "globals.yml"
    assert (f"{globals_file}: key 'kolla_external_vip_address' must be an IP address when kolla_enable_tls_external "
            f"is true, got ''") in refused({"kolla_enable_tls_external": True})
    assert f"{globals_file}: key 'kolla_external_vip_address' is the internal VIP" in refused(
        {**TLS, "kolla_external_vip_address": "127.0.0.10"})
    assert f"{globals_file}: key 'kolla_enable_tls_external' is true but 'enable_haproxy' is false" in refused(
        {**TLS, "enable_haproxy": False})
    assert f"{tmp_path / 'certificates' / 'haproxy.pem'}: no such file" in refused(TLS)
    os.makedirs(tmp_path / "elsewhere")
    assert f"{tmp_path / 'elsewhere' / 'haproxy.pem'}: no such file" in refused(
        {**TLS, "kolla_certificates_dir": str(tmp_path / "elsewhere")})


def test_with_internal_tls_every_service_reaches_the_others_over_https_trusting_the_ca(tmp_path):
    """kolla_enable_tls_internal: the internal VIP serves haproxy-internal.pem, every
    internal URL (catalog, keystonemiddleware, service credentials, registration) is
    https, and every container and job that calls an endpoint trusts the private CA
    (kolla_copy_ca_into_containers)."""
    folder = made(tmp_path / "certificates", names=["127.0.0.10"], pem="haproxy-internal.pem")
    kolla = pillar(tmp_path, INTERNAL_TLS)
    services = {s["name"]: s for s in kolla["services"]}
    haproxy = services["haproxy"]["containers"][0]["files"]
    assert "bind 127.0.0.10:9292 ssl crt /etc/haproxy/certificates/haproxy-internal.pem" in haproxy["haproxy.cfg"]
    assert "Strict-Transport-Security" not in haproxy["haproxy.cfg"]        # only on the external VIP
    assert kolla["passwords"]["haproxy_internal_pem"] == haproxy["haproxy-internal.pem"]
    ca = (folder / certificates.CA_CERT).read_text()
    for service in ("glance", "placement"):      # clients of keystone
        container = services[service]["containers"][0]
        files, spec = container["files"], container["spec"]
        assert files[certificates.CA_FILE_NAME] == ca, spec["name"]
        assert {"source": f"/var/lib/kolla/config_files/{certificates.CA_FILE_NAME}",
                "dest": certificates.CA_IN_CONTAINERS, "owner": "root", "perm": "0644"} in \
            json.loads(files["config.json"])["config_files"]
        assert spec["environment"]["REQUESTS_CA_BUNDLE"] == certificates.CA_IN_CONTAINERS, spec["name"]
    for service in ("mariadb", "memcached", "haproxy"):   # no client of an endpoint: left as they are
        container = services[service]["containers"][0]
        assert certificates.CA_FILE_NAME not in container["files"], service
        assert "SSL_CERT_FILE" not in (container["spec"].get("environment") or {}), service
    glance = services["glance"]["containers"][0]["files"]["glance-api.conf"]
    assert "auth_url = https://127.0.0.10:5000\n" in glance and "http://127.0.0.10" not in glance
    jobs = {j["name"]: j for s in kolla["services"] for j in s["jobs"]}
    register = jobs["glance_keystone_register"]
    assert register["environment"]["OS_AUTH_URL"] == "https://127.0.0.10:5000/v3"
    assert register["environment"]["SSL_CERT_FILE"] == f"/var/lib/kolla/config_files/{certificates.CA_FILE_NAME}"
    assert register["config_dir"].endswith("/glance_api")        # where that file is
    assert json.loads(register["environment"]["KOLLA_REGISTRATION"])["services"][0]["endpoints"] == {
        "public": "https://127.0.0.10:9292", "internal": "https://127.0.0.10:9292", "admin": "https://127.0.0.10:9292"}
    # A job in the folder of a container that trusts the CA trusts it; keystone calls no endpoint.
    assert jobs["glance_db_sync"]["environment"]["SSL_CERT_FILE"] == certificates.CA_IN_CONTAINERS
    assert "SSL_CERT_FILE" not in jobs["keystone_bootstrap"].get("environment", {})


def test_internal_tls_from_the_private_ca_without_copying_it_is_refused(tmp_path):
    made(tmp_path / "certificates", names=["127.0.0.10"], pem="haproxy-internal.pem")
    with pytest.raises(ValidationError) as error:
        pillar(tmp_path, {**INTERNAL_TLS, "kolla_copy_ca_into_containers": False})
    assert f"{tmp_path / 'globals.yml'}: key 'kolla_copy_ca_into_containers' is false" in error.value.problems[0]
    (tmp_path / "certificates" / certificates.CA_CERT).unlink()
    with pytest.raises(ValidationError) as error:
        pillar(tmp_path, INTERNAL_TLS)
    assert f"{tmp_path / 'certificates' / certificates.CA_CERT}: no such file" in error.value.problems[0]


def test_with_backend_tls_haproxy_calls_each_api_over_https_checking_its_certificate(tmp_path):
    """kolla_enable_tls_backend: every API haproxy balances gets backend-cert.pem and
    backend-key.pem (kolla-ansible's two files, made for the host's API address) and
    serves HTTPS with them; haproxy calls and checks it over TLS, trusting the CA. The
    console proxy and the database stay as they are, and a certificate for another
    address is refused naming the file."""
    folder = tmp_path / "certificates"
    certificates.make(folder, {certificates.BACKEND.pem: ["127.0.0.1"]}, out=lambda m: None)
    assert (folder / "backend-key.pem").stat().st_mode & 0o777 == 0o600
    assert "PRIVATE KEY" not in (folder / "backend-cert.pem").read_text()
    backend_tls = {"kolla_enable_tls_backend": True, "kolla_copy_ca_into_containers": True,
                   "enable_horizon": True, "enable_nova": True}
    kolla = pillar(tmp_path, backend_tls)
    services = {s["name"]: s for s in kolla["services"]}
    cfg = services["haproxy"]["containers"][0]["files"]["haproxy.cfg"]
    tls = f"ssl verify required ca-file {certificates.CA_IN_CONTAINERS}"
    for entry in ("keystone", "glance", "placement", "nova_api", "horizon"):   # checks and requests
        for backend in (entry, f"{entry}_waiting"):
            servers = [line for line in cfg.split(f"\nbackend {backend}\n")[1].split("\n\n")[0].splitlines()
                       if line.lstrip().startswith("server ")]
            assert servers and all(line.endswith(tls) for line in servers), (backend, servers)
    assert tls not in cfg.split("\nbackend nova_novncproxy\n")[1].split("\n\n")[0]   # websockify: plain
    assert certificates.CA_FILE_NAME in services["haproxy"]["containers"][0]["files"]   # it checks with the CA
    pem = (folder / "backend-cert.pem").read_text() + (folder / "backend-key.pem").read_text()
    for service in ("keystone", "glance", "placement", "horizon", "nova"):
        container = next(c for c in services[service]["containers"] if c["spec"].get("listen"))
        assert container["files"][certificates.BACKEND_FILE_NAME] == pem, service
        started = json.loads(container["files"]["config.json"])
        assert {"source": f"/var/lib/kolla/config_files/{certificates.BACKEND_FILE_NAME}",
                "dest": certificates.BACKEND_IN_CONTAINERS, "owner": started["user"], "perm": "0600"} in \
            started["config_files"], service      # readable by the service's user only
        assert container["spec"]["environment"][certificates.BACKEND_VARIABLE] == certificates.BACKEND_IN_CONTAINERS
    assert kolla["passwords"][certificates.BACKEND.secret] == pem     # blanked out of output like a password
    for container in ("mariadb", "nova_novncproxy", "nova_conductor"):
        spec = next(c for s in kolla["services"] for c in s["containers"] if c["spec"]["name"] == container)
        assert certificates.BACKEND_FILE_NAME not in spec["files"], container

    certificates.make(folder, {certificates.BACKEND.pem: ["127.0.0.2"]}, out=lambda m: None)
    with pytest.raises(ValidationError) as error:
        pillar(tmp_path, backend_tls)
    assert f"{folder / 'backend-cert.pem'}: does not cover 127.0.0.1 (api_interface_address)" in \
        error.value.problems[0]
    (folder / "backend-key.pem").unlink()
    with pytest.raises(ValidationError) as error:
        pillar(tmp_path, backend_tls)
    assert f"{folder / 'backend-key.pem'}: no such file" in error.value.problems[0]
    with pytest.raises(ValidationError) as error:
        pillar(tmp_path, {**backend_tls, "kolla_copy_ca_into_containers": False})
    assert "key 'kolla_enable_tls_backend' is true but 'kolla_copy_ca_into_containers' is false" in \
        "\n".join(error.value.problems)


def test_through_a_master_the_backend_certificate_covers_every_hosts_api_address(tmp_path):
    """`kolla-salt --master DIR certificates` with backend TLS: one certificate for the
    API address of every host that answers (their facts), which each host's pillar then
    finds covering its own."""
    from argparse import Namespace

    from cryptography import x509

    from kolla_salt.cli.prepare import cmd_certificates

    class Master:   # the interfaces a salt-master's hosts give (kolla_container.facts)
        def interfaces(self):
            return {"host1": {"eth0": ["198.18.0.11"]}, "host2": {"eth0": ["198.18.0.12"]}, "host3": None}

    write_secrets(tmp_path)
    (tmp_path / "globals.yml").write_text(yaml.safe_dump({
        "network_interface": "eth0", "kolla_enable_tls_backend": True, "kolla_copy_ca_into_containers": True}))
    assert cmd_certificates(Namespace(road=Master(), config_dir=str(tmp_path), days=30, renew=False)) == 0
    cert = x509.load_pem_x509_certificate((tmp_path / "certificates" / certificates.BACKEND.pem).read_bytes())
    covered = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in covered.get_values_for_type(x509.IPAddress)] == ["198.18.0.11", "198.18.0.12"]
    for address in ("198.18.0.11", "198.18.0.12"):
        certificates.check(tmp_path / "certificates", certificates.BACKEND, [address])


def old_style(folder, wanted):
    """The CA and certificates `kolla-salt certificates` made before the key
    identifiers and key usage (basic constraints only): what Python 3.13's strict
    verification refuses."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def signed(subject, public_key, signing_key, ca, names=()):
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
                   .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kolla-salt private CA")]))
                   .public_key(public_key).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
        if names:
            builder = (builder.add_extension(x509.SubjectAlternativeName(certificates._names(names)), critical=False)
                       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = signed("kolla-salt private CA", ca_key.public_key(), ca_key, ca=True)
    (folder / "ca").mkdir(parents=True)
    (folder / "private").mkdir()
    (folder / certificates.CA_CERT).write_text(certificates._pem(ca))
    (folder / certificates.CA_KEY).write_text(certificates._pem(ca_key))
    for pem, names in wanted.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = certificates._pem(signed(names[0], key.public_key(), ca_key, ca=False, names=names))
        if pem == certificates.BACKEND.pem:
            (folder / pem).write_text(cert + certificates._pem(ca))
            (folder / certificates.BACKEND.key_file).write_text(certificates._pem(key))
        else:
            (folder / pem).write_text(cert + certificates._pem(ca) + certificates._pem(key))
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(0o600)      # as kolla-salt wrote them
    return folder


def handshake(ca, pem, hostname, strict=True):
    """A TLS handshake in memory: a server serving `pem` (chain and key), a client
    trusting the CA `ca` (PEM text) that checks `hostname`, with VERIFY_X509_STRICT
    (Python 3.13's default) unless not `strict`; SSLCertVerificationError when the
    client refuses the chain."""
    import ssl

    client = ssl.create_default_context(cadata=ca)
    if strict:
        client.verify_flags |= ssl.VERIFY_X509_STRICT
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pem)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    ends = [(client.wrap_bio(to_client, to_server, server_hostname=hostname), to_server),
            (server.wrap_bio(to_server, to_client, server_side=True), to_client)]
    done = set()
    for _ in range(10):
        for side, (end, _) in enumerate(ends):
            if side not in done:
                try:
                    end.do_handshake()
                    done.add(side)
                except ssl.SSLWantReadError:
                    pass
        if len(done) == 2:
            return ends[0][0].getpeercert()
    raise AssertionError("no handshake")


def test_a_ca_made_before_the_key_identifiers_is_refused_and_renew_makes_a_new_one_keeping_the_old(tmp_path):
    """A CA without key identifiers and key usage (made by an older kolla-salt) fails
    Python 3.13's strict verification: the deploy refuses it, naming the file, before
    anything changes; `kolla-salt certificates --renew` makes a new CA, keeps the old
    one as ca/root.crt.old, and signs again every certificate the old one signed."""
    import ssl
    from argparse import Namespace

    from kolla_salt.cli.prepare import cmd_certificates

    folder = old_style(tmp_path / "certificates", {certificates.EXTERNAL.pem: NAMES,
                                                   certificates.BACKEND.pem: ["127.0.0.1"]})
    ca_path, pem = folder / certificates.CA_CERT, folder / certificates.EXTERNAL.pem
    old_ca, old_key, old_backend = (ca_path.read_text(), (folder / certificates.CA_KEY).read_text(),
                                    (folder / certificates.BACKEND.pem).read_text())
    handshake(old_ca, pem, NAMES[0], strict=False)             # Python 3.11's default verifies it...
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(old_ca, pem, NAMES[0])                       # ...3.13's does not
    assert certificates.lacking(x509_of(ca_path), ca=True) == [
        "key usage keyCertSign", "a Subject Key Identifier"]
    assert certificates.lacking(x509_of(pem), ca=False) == ["an Authority Key Identifier"]
    said = problems(folder)
    assert (f"{ca_path}: lacks key usage keyCertSign, a Subject Key Identifier, which Python 3.13's strict TLS "
            f"verification (trixie's images) requires of a CA: `kolla-salt certificates --renew` makes a new CA "
            f"(this one kept as root.crt.old)") in said
    assert f"{pem}: lacks an Authority Key Identifier" in said
    with pytest.raises(ValidationError) as error:              # the deploy's pillar: refused, nothing changed
        pillar(tmp_path, TLS)
    assert f"{ca_path}: lacks key usage keyCertSign" in "\n".join(error.value.problems)
    assert ca_path.read_text() == old_ca and not (folder / "ca" / "root.crt.old").exists()

    said = []
    certificates.make(folder, {certificates.EXTERNAL.pem: NAMES}, 30, out=said.append)
    assert said[0] == (f"{ca_path}: made again (it lacked key usage keyCertSign, a Subject Key Identifier, which "
                       f"Python 3.13 requires); the old one is root.crt.old, its key root.key.old: give clients "
                       f"that trusted it this one")
    assert len(said) == 3       # the CA, then both certificates it had signed
    assert (folder / "ca" / "root.crt.old").read_text() == old_ca
    assert (folder / "private" / "root.key.old").read_text() == old_key
    for path in (ca_path, folder / certificates.CA_KEY, folder / "ca" / "root.crt.old",
                 folder / "private" / "root.key.old"):
        assert path.stat().st_mode & 0o777 == 0o600, path
    new_ca = ca_path.read_text()
    assert new_ca != old_ca and certificates.lacking(x509_of(ca_path), ca=True) == []
    certificates.check(folder, certificates.EXTERNAL, NAMES)
    assert handshake(new_ca, pem, NAMES[0])["subject"] == ((("commonName", NAMES[0]),),)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(old_ca, pem, NAMES[0], strict=False)         # signed by the new CA only
    # The backend certificate, not asked for, was the old CA's: signed again for its address.
    assert (folder / certificates.BACKEND.pem).read_text() != old_backend
    certificates.check(folder, certificates.BACKEND, ["127.0.0.1"])
    backend = folder / "backend.pem"
    backend.write_text((folder / certificates.BACKEND.pem).read_text()
                       + (folder / certificates.BACKEND.key_file).read_text())
    handshake(new_ca, backend, "127.0.0.1")
    # Once made again, kept: the next `certificates` keeps it, nothing more is set aside.
    said = []
    certificates.make(folder, {certificates.EXTERNAL.pem: NAMES}, 30, out=said.append)
    assert said[0].startswith(f"{ca_path}: kept") and len(said) == 2
    assert ca_path.read_text() == new_ca and not (folder / "ca" / "root.crt.old.2").exists()

    # The command, `kolla-salt certificates --renew`, on an old CA whose certificates are still
    # valid; without --renew as well, since the deploy refuses them.
    for renew in (True, False):
        shutil.rmtree(folder)
        old_style(folder, {certificates.EXTERNAL.pem: NAMES})
        old_ca = ca_path.read_text()
        assert cmd_certificates(Namespace(master=None, config_dir=str(tmp_path), days=30, renew=renew)) == 0
        assert (folder / "ca" / "root.crt.old").read_text() == old_ca
        certificates.check(folder, certificates.EXTERNAL, NAMES)
        handshake(ca_path.read_text(), pem, NAMES[0])


def x509_of(path):
    from cryptography import x509
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_a_ca_that_has_them_is_kept_and_an_operators_self_signed_certificate_needs_no_authority_key_id(tmp_path):
    made(tmp_path)
    ca = tmp_path / certificates.CA_CERT
    assert certificates.lacking(x509_of(ca), ca=True) == []
    assert certificates.lacking(x509_of(tmp_path / certificates.EXTERNAL.pem), ca=False) == []
    assert certificates.lacking(x509_of(ca), ca=False) == []   # self-signed: no issuer to identify
    leaf = x509_of(tmp_path / certificates.EXTERNAL.pem)
    assert "basic constraints CA:TRUE" in certificates.lacking(leaf, ca=True)
    # A CA here without its key: made again, the one here kept aside, not overwritten.
    (tmp_path / certificates.CA_KEY).unlink()
    brought = ca.read_text()
    said = []
    certificates.make(tmp_path, {certificates.EXTERNAL.pem: NAMES}, 30, out=said.append)
    assert said[0].endswith("; the one here without its key is root.crt.old")
    assert (tmp_path / "ca" / "root.crt.old").read_text() == brought
    certificates.check(tmp_path, certificates.EXTERNAL, NAMES)
