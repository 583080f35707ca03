import pytest

from kolla_salt.declaration.merge import merge
from kolla_salt.errors import ValidationError

GENERATED = "[DEFAULT]\ndebug = False\nlog_dir = /var/log\n\n[database]\nconnection = mysql://x\n"


def test_ini_override_wins_key_by_key_and_adds_sections():
    out = merge("keystone.conf", GENERATED, "[DEFAULT]\ndebug = True\n[cache]\nenabled = true\n", "o")
    assert "debug = True" in out and "debug = False" not in out
    assert "log_dir = /var/log" in out and "connection = mysql://x" in out
    assert "[cache]\nenabled = true" in out


def test_ini_keeps_key_case_and_repeated_keys():
    out = merge("a.conf", "[x]\nKey = 1\n", "[x]\nmulti = a\nmulti = b\n", "o")
    assert "Key = 1" in out and out.count("multi =") == 2


def test_a_mysql_option_file_is_merged_with_its_keys_that_stand_alone():
    out = merge("my.cnf", "[mysqld]\nport = 3306\nskip-name-resolve\n", "[mysqld]\nmax_connections = 1001\n"
                "skip-log-bin\n", "config/mariadb/my.cnf")
    assert out.splitlines()[:5] == ["[mysqld]", "port = 3306", "skip-name-resolve", "max_connections = 1001",
                                    "skip-log-bin"]


def test_broken_override_names_file_and_line():
    with pytest.raises(ValidationError, match=r"config/keystone/keystone.conf:2: expected 'key = value'"):
        merge("keystone.conf", GENERATED, "[DEFAULT]\nthis is not ini\n", "config/keystone/keystone.conf")


def test_yaml_is_deep_merged():
    out = merge("policy.yaml", "a: {b: 1, c: 2}\n", "a: {c: 3}\nd: 4\n", "o")
    assert "b: 1" in out and "c: 3" in out and "d: 4" in out
