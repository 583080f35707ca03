"""A lab's name reaches into the paths of its hosts' Unix sockets, which the kernel
caps: a name that does not fit is refused before the lab makes anything (it left
every minion silent to the master, and `lab up` failed after 90 s)."""
import pytest

from kolla_salt.errors import ValidationError
from kolla_salt.lab.namespaces import DATA_ROOT, MINION_SOCKET, UNIX_PATH_MAX, Lab


def test_a_name_too_long_for_the_minions_sockets_is_refused_before_anything_is_made():
    name = "kst" + "x" * (UNIX_PATH_MAX - len(str(DATA_ROOT / "kst" / "host1" / "salt" / MINION_SOCKET)) + 1)
    with pytest.raises(ValidationError) as refused:
        Lab(name, hosts=1).up()
    assert refused.value.problems == [f"lab: --name '{name}' is 1 character(s) too long: each host's salt-minion "
                                      f"binds a Unix socket under {DATA_ROOT / name} (at most 107 bytes to its path)"]
    assert not (DATA_ROOT / name).exists()

