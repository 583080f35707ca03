"""TLS on haproxy's endpoints and behind them: a private CA and the certificates, made
by `kolla-salt certificates` or brought by the operator, where kolla-ansible keeps them
(the operator folder's certificates/: haproxy.pem for the external VIP and
haproxy-internal.pem for the internal one, each the certificate chain and its key in
one file; backend-cert.pem and backend-key.pem for the APIs behind haproxy, on every
host's API address; ca/root.crt), and the checks a deploy makes of them before
anything changes."""
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..errors import ValidationError
from ..private import write_private

CA_CERT = Path("ca") / "root.crt"
CA_KEY = Path("private") / "root.key"   # beside, not in, ca/: ca/ is what clients are given
RENEW_WITHIN = datetime.timedelta(days=30)   # a deploy warns, `certificates` makes a new one
# Where kolla_copy_ca_into_containers puts the CA in every container (kolla_start
# copies it from the container's config folder), and the variables that make Python's
# TLS clients trust it: OpenSSL's (urllib: the checks, the registration) and requests'
# (keystoneauth: every service calling another, horizon).
CA_IN_CONTAINERS = "/etc/kolla-salt/ca-certificates.crt"
CA_FILE_NAME = "ca-certificates.crt"
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
# Where an API behind haproxy finds its backend certificate and key (one file), and the
# variable that tells its server to speak HTTPS with them (kolla_uwsgi_serve).
BACKEND_IN_CONTAINERS = "/etc/kolla-salt/backend.pem"
BACKEND_FILE_NAME = "backend.pem"
BACKEND_VARIABLE = "KOLLA_TLS_BACKEND"


@dataclass(frozen=True)
class Endpoint:
    """Where TLS is served (haproxy's two faces, the APIs behind it) and what it takes."""
    flag: str         # the globals.yml key that turns TLS on there
    pem: str          # its certificate (and its key, unless key_file), in certificates_dir
    secret: str       # the passwords key its PEM travels under in the pillar (blanked out of output)
    names: tuple      # the settings whose values it must cover, its name first
    key_file: str = ""   # its key in a file of its own (kolla-ansible's backend-key.pem)

    def covers(self, settings):
        """The names its certificate must cover (an empty FQDN means the address; a
        list, such as every host's API address, is each of its names)."""
        values = [value for key in self.names
                  for value in (settings[key] if isinstance(settings[key], list) else [settings[key]])]
        return [name for name in dict.fromkeys(values) if name]

    @property
    def files(self):
        """Its files in certificates_dir: the certificate's, then its key's when apart."""
        return tuple(name for name in (self.pem, self.key_file) if name)


EXTERNAL = Endpoint("kolla_enable_tls_external", "haproxy.pem", "haproxy_external_pem",
                    ("kolla_external_fqdn", "kolla_external_vip_address"))
INTERNAL = Endpoint("kolla_enable_tls_internal", "haproxy-internal.pem", "haproxy_internal_pem",
                    ("kolla_internal_vip_address",))
# haproxy to the APIs: each host's certificate must cover its API address (one
# certificate may cover every host's: `kolla-salt certificates` makes that one).
BACKEND = Endpoint("kolla_enable_tls_backend", "backend-cert.pem", "backend_pem", ("api_interface_address",),
                   key_file="backend-key.pem")
ENDPOINTS = (EXTERNAL, INTERNAL, BACKEND)


def certificates_dir(settings, config_dir):
    """kolla_certificates_dir, else the operator folder's certificates/."""
    return Path(settings["kolla_certificates_dir"] or Path(config_dir) / "certificates")


def enabled(settings):
    """The endpoints TLS is on for."""
    return [endpoint for endpoint in ENDPOINTS if settings[endpoint.flag]]


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _names(names):
    found = []
    for name in names:
        try:
            found.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            found.append(x509.DNSName(name))
    return found


def _certificate(subject, issuer, public_key, signing_key, days, ca, names=()):
    now = _now()
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
               # Key identifiers and key usage: Python 3.13 (trixie's) verifies with
               # VERIFY_X509_STRICT by default, which refuses a certificate without an
               # Authority Key Identifier and a CA without a Subject Key Identifier or
               # key usage ("Missing Authority Key Identifier").
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
                              critical=False)
               .add_extension(x509.KeyUsage(digital_signature=not ca, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                                            crl_sign=ca, encipher_only=False, decipher_only=False), critical=True))
    if names:
        builder = (builder.add_extension(x509.SubjectAlternativeName(_names(names)), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    return builder.sign(signing_key, hashes.SHA256())


def _new_key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem(obj):
    """A private key, a public key or a certificate in PEM."""
    if hasattr(obj, "private_bytes"):
        return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode()
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM).decode()
    return obj.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def lacking(cert, ca):
    """What Python 3.13's strict verification (ssl.VERIFY_X509_STRICT, on by default
    from 3.13, trixie's: OpenSSL's X509_V_FLAG_X509_STRICT) needs of `cert` as a CA
    (`ca`), or as the certificate a server serves, that it lacks: [] when nothing.
    A CA: version 3, basic constraints CA:TRUE marked critical, key usage keyCertSign
    and a Subject Key Identifier; any certificate another signed: an Authority Key
    Identifier."""
    if cert.version != x509.Version.v3:
        return ["X.509 version 3 (its extensions)"]
    extensions = {type(extension.value): extension for extension in cert.extensions}
    found = []
    if ca:
        constraints = extensions.get(x509.BasicConstraints)
        if constraints is None or not constraints.value.ca:
            found.append("basic constraints CA:TRUE")
        elif not constraints.critical:
            found.append("basic constraints marked critical")
        usage = extensions.get(x509.KeyUsage)
        if usage is None or not usage.value.key_cert_sign:
            found.append("key usage keyCertSign")
        if x509.SubjectKeyIdentifier not in extensions:
            found.append("a Subject Key Identifier")
    if cert.issuer != cert.subject and x509.AuthorityKeyIdentifier not in extensions:
        found.append("an Authority Key Identifier")
    return found


def _signed_by(folder, ca):
    """{file name: the names it covers} of the certificates in `folder` (ENDPOINTS')
    that `ca` signed."""
    found = {}
    for endpoint in ENDPOINTS:
        path = folder / endpoint.pem
        try:
            cert = x509.load_pem_x509_certificates(path.read_bytes())[0]
            cert.verify_directly_issued_by(ca)
            covered = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except (OSError, ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
            continue
        names = [str(entry.value) for entry in covered if isinstance(entry, (x509.DNSName, x509.IPAddress))]
        if names:
            found[endpoint.pem] = names
    return found


def _aside(path):
    """`path` renamed to path.old (path.old.2, .3... when that is taken); the new name."""
    aside, number = path.with_name(path.name + ".old"), 1
    while aside.exists():
        number += 1
        aside = path.with_name(f"{path.name}.old.{number}")
    path.rename(aside)
    return aside


def make(folder, wanted, days=365, out=print):
    """The private CA (kept once made) and, for each {file name: names} of `wanted`,
    that certificate signed by it (chain and key in one file), in `folder`; every
    file mode 0600. A CA that lacks what Python 3.13's strict verification needs
    (lacking: one made before the key identifiers) is made again, the old one kept
    beside it (ca/root.crt.old, its key private/root.key.old), and every certificate
    here that it signed is signed again for the names it covered, with `wanted`: no
    certificate is signed by a CA the deploy refuses. A CA here without its key is
    made again too, the old one kept the same way."""
    folder = Path(folder)
    ca_path, key_path = folder / CA_CERT, folder / CA_KEY
    ca_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_cert = old = None
    if ca_path.exists() and key_path.exists():
        ca_cert = x509.load_pem_x509_certificate(ca_path.read_bytes())
        ca_key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        lacked = lacking(ca_cert, ca=True)
        if lacked:
            old, ca_cert = ca_cert, None
        else:
            out(f"{ca_path}: kept (valid until {ca_cert.not_valid_after_utc:%Y-%m-%d})")
    if ca_cert is None:
        ca_key = _new_key()
        ca_cert = _certificate("kolla-salt private CA", "kolla-salt private CA", ca_key.public_key(), ca_key,
                               days * 10, ca=True)
        if old is None:
            said = f"made, the CA clients trust (its key: {key_path})"
            if ca_path.exists():   # one brought without its key: set aside too, not replaced unsaid
                said += f"; the one here without its key is {_aside(ca_path).name}"
        else:   # every certificate here it signed, signed again (with `wanted`, as asked)
            wanted = {**_signed_by(folder, old), **wanted}
            old_cert, old_key = _aside(ca_path), _aside(key_path)
            said = (f"made again (it lacked {', '.join(lacked)}, which Python 3.13 requires); the old one is "
                    f"{old_cert.name}, its key {old_key.name}: give clients that trusted it this one")
        write_private(key_path, _pem(ca_key))
        write_private(ca_path, _pem(ca_cert))
        out(f"{ca_path}: {said}")
    key_files = {endpoint.pem: endpoint.key_file for endpoint in ENDPOINTS if endpoint.key_file}
    for pem, names in wanted.items():
        key = _new_key()
        cert = _certificate(names[0], "kolla-salt private CA", key.public_key(), ca_key, days, ca=False, names=names)
        if pem in key_files:
            write_private(folder / key_files[pem], _pem(key))
            write_private(folder / pem, _pem(cert) + _pem(ca_cert))
        else:
            write_private(folder / pem, _pem(cert) + _pem(ca_cert) + _pem(key))
        out(f"{folder / pem}: made for {', '.join(names)}, valid until {cert.not_valid_after_utc:%Y-%m-%d}")


def check(folder, endpoint, names, now=None):
    """(the text of `endpoint`'s PEM file, its certificate's expiry) once it holds a
    certificate and its key, the key matches, the certificate covers `names`, is valid
    now, and ca/root.crt (when there) signed it, and neither lacks what Python 3.13's
    strict verification needs (lacking); ValidationError naming the file otherwise."""
    path = Path(folder) / endpoint.pem
    fix = "`kolla-salt certificates` makes one"
    paths = [Path(folder) / name for name in endpoint.files]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ValidationError([f"{p}: no such file ({endpoint.flag} needs {' and '.join(endpoint.files)}, the "
                               f"certificate for {', '.join(names)} and its key): {fix}" for p in missing])
    data = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in paths)
    try:
        chain = x509.load_pem_x509_certificates(data)
        key = serialization.load_pem_private_key(
            b"".join(block for block in _pem_blocks(data) if b"PRIVATE KEY" in block.split(b"\n", 1)[0]), None)
    except (ValueError, TypeError) as error:
        raise ValidationError([f"{path}: expected PEM certificates and an unencrypted private key ({error})"])
    cert, problems = chain[0], []
    if _pem(cert.public_key()) != _pem(key.public_key()):
        problems.append(f"{path}: its private key does not belong to its certificate")
    now = now or _now()
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        problems.append(f"{path}: valid from {cert.not_valid_before_utc:%Y-%m-%d %H:%M} to "
                        f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now: {fix}")
    try:
        covered = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        covered = []
    missing = [n for n, entry in zip(names, _names(names)) if entry not in covered]
    if missing:
        problems.append(f"{path}: does not cover {', '.join(missing)} ({', '.join(endpoint.names)}): {fix}")
    strict = "which Python 3.13's strict TLS verification (trixie's images) requires"
    lacked = lacking(cert, ca=False)
    if lacked:
        problems.append(f"{path}: lacks {', '.join(lacked)}, {strict}: {fix}")
    ca_path = Path(folder) / CA_CERT
    if ca_path.is_file():
        ca = x509.load_pem_x509_certificate(ca_path.read_bytes())
        lacked = lacking(ca, ca=True)
        if lacked:
            problems.append(f"{ca_path}: lacks {', '.join(lacked)}, {strict} of a CA: `kolla-salt certificates "
                            f"--renew` makes a new CA (this one kept as {ca_path.name}.old) and signs again the "
                            f"certificates it signed")
        try:
            cert.verify_directly_issued_by(ca)
        except (InvalidSignature, ValueError, TypeError) as error:
            problems.append(f"{path}: not signed by {ca_path} ({type(error).__name__})")
    if problems:
        raise ValidationError(problems)
    return data.decode(), cert.not_valid_after_utc


def checked(settings, config_dir, endpoint, now=None):
    """(its PEM file's path, its text, its expiry) of `endpoint`'s certificate in
    certificates_dir, for the names the settings give it (check)."""
    folder = certificates_dir(settings, config_dir)
    return (folder / endpoint.pem, *check(folder, endpoint, endpoint.covers(settings), now=now))


def served(settings, config_dir, now=None):
    """[(endpoint, its PEM file's path, its text, its expiry)] of every endpoint the
    settings turn TLS on for."""
    return [(endpoint, *checked(settings, config_dir, endpoint, now)) for endpoint in enabled(settings)]


def trusted_ca(settings, config_dir):
    """The text of ca/root.crt with kolla_copy_ca_into_containers (every container
    trusts it), else None. A private CA behind the internal endpoints without it is
    refused: the services would not trust each other's endpoints."""
    path = certificates_dir(settings, config_dir) / CA_CERT
    if settings["kolla_copy_ca_into_containers"]:
        if not path.is_file():
            raise ValidationError([f"{path}: no such file (kolla_copy_ca_into_containers gives every container "
                                   f"the CA that signed haproxy's certificates): `kolla-salt certificates` makes "
                                   f"one"])
        return path.read_text()
    if settings["kolla_enable_tls_internal"] and path.is_file():
        raise ValidationError([f"{Path(config_dir) / 'globals.yml'}: key 'kolla_copy_ca_into_containers' is false, "
                               f"but the internal endpoints' certificate comes from the private CA {path}: the "
                               f"services calling each other would not trust it; set it to true"])
    return None


def _pem_blocks(data):
    """The -----BEGIN ...----- blocks of a PEM file."""
    blocks, current = [], []
    for line in data.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN"):
            current = [line]
        elif current:
            current.append(line)
            if line.startswith(b"-----END"):
                blocks.append(b"".join(current))
                current = []
    return blocks


def expiring(expiry, now=None):
    """Whether a certificate valid until `expiry` is due for renewal."""
    return expiry - (now or _now()) < RENEW_WITHIN
