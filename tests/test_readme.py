"""Every ```python block of README.md and of the pages in docs/ runs as written,
against real brokers.

Each block is one test, named by its file and line (``docs/broker.md:52``). The only
change made to a block is the broker address: the documents' ``127.0.0.1:9092`` (or
their three-broker list) becomes the address of a broker started for the test. What a
block needs decides where it runs, and under which marker:

- it names ``tickwheel.spark``: a fixture broker (with its schema registry, as below)
  and a local Spark session (``spark``);
- it names the three-broker list: a ZooKeeper and three brokers (``cluster``);
- it names ``SASL_SSL``: the Security page's walk-through (``secured``), against a
  broker made from that page itself -- its ``openssl`` commands make the
  certificates and its ``server.properties`` block is the broker's configuration, with
  ``/etc/tickwheel`` and ``/var/lib/tickwheel`` moved to a temporary directory and the
  listener on a free port;
- it shows tests taking ``tickwheel_faults`` (or other fixtures of the plugin beside
  it): a test file of its own, run by pytest in a child process (``integration``), so
  the plugin hands each test its fixtures as it would in the reader's project;
- it names ``127.0.0.1:9092``, or shows a test taking ``tickwheel_broker``: the
  ``tickwheel_broker`` fixture (``integration``), and such a test is called with it;
  that broker serves the schema registry too, whose address replaces the documents'
  ``http://127.0.0.1:8081``;
- otherwise nothing (the fast tier).

A block that reads a topic the documents filled before it (``events``, from the kcat
example) gets that topic filled first, as the reader's shell did. No block is skipped.

The README's relative links must lead to files and headings that exist: the site's
strict build (``mkdocs build --strict``) checks those between the pages, not the README's.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tickwheel.server import BackgroundBroker, BrokerConfig, parse_properties

ROOT = Path(__file__).resolve().parents[1]
# The documents whose blocks run: the README, then every page of the site.
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
SINGLE = "127.0.0.1:9092"
THREE = "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
SECURED = "SASL_SSL"
REGISTRY = "http://127.0.0.1:8081"
SECURED_ADDRESS = "127.0.0.1:9093"
# The Security page's directories -> where the test puts them, under its tmp_path.
SECURED_DIRS = {"/etc/tickwheel": "etc", "/var/lib/tickwheel": "data"}
_SHELL_FENCE = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_PROPERTIES_FENCE = re.compile(r"^```properties\n(.*?)^```", re.MULTILINE | re.DOTALL)
TIMEOUT_S = 30
PYTEST_TIMEOUT_S = 180
_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
# Topics the documents' shell examples fill before a block reads them: name -> values.
_FILLED_BEFORE = {"events": [str(n).encode() for n in range(1, 9)]}


@dataclass(frozen=True, slots=True)
class Block:
    """One ```python block: its document (relative to the checkout), its first line
    there, and its code."""

    document: str
    line: int
    code: str

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def kind(self) -> str:
        """What the block needs: ``spark``, ``secured``, ``cluster``, ``pytest``, ``broker``
        or ``none``."""
        if "tickwheel.spark" in self.code:
            return "spark"
        if SECURED in self.code:
            return "secured"
        if THREE in self.code:
            return "cluster"
        if "def test_" in self.code and "tickwheel_faults" in self.code:
            return "pytest"
        if SINGLE in self.code or ("def test_" in self.code and "tickwheel_broker" in self.code):
            return "broker"
        return "none"


def _blocks() -> list[Block]:
    blocks = []
    for document in DOCUMENTS:
        text = document.read_text()
        name = str(document.relative_to(ROOT))
        blocks += [
            Block(name, text.count("\n", 0, match.start()) + 1, match.group(1))
            for match in _FENCE.finditer(text)
        ]
    return blocks


def _params(kind: str, *marks: pytest.MarkDecorator) -> list[object]:
    return [
        pytest.param(block, id=block.name, marks=marks) for block in _blocks() if block.kind == kind
    ]


def _run(block: Block, bootstrap: str | None = None, registry: str | None = None) -> str:
    """Run ``block`` as a script of its own, the documents' addresses replaced by
    ``bootstrap`` and ``registry``; returns what it printed."""
    code = block.code
    if registry is not None:
        code = code.replace(REGISTRY, registry)
    if bootstrap is not None:
        code = code.replace(THREE, bootstrap).replace(SINGLE, bootstrap)
    printed = io.StringIO()
    namespace: dict[str, object] = {"__name__": f"block_line_{block.line}"}
    with redirect_stdout(printed):
        exec(compile(code, block.name, "exec"), namespace)
    _call_its_tests(namespace, bootstrap)
    return printed.getvalue()


def _call_its_tests(namespace: dict[str, object], bootstrap: str | None) -> None:
    """A block that shows a test using the ``tickwheel_broker`` fixture: run that test
    with the broker the block ran against."""
    for name, value in namespace.items():
        if name.startswith("test_") and callable(value) and bootstrap is not None:
            test: Callable[[object], None] = value
            test(_Fixture(bootstrap))


@dataclass(frozen=True, slots=True)
class _Fixture:
    bootstrap_servers: str


def _fill_topics_it_reads(block: Block, bootstrap: str) -> None:
    for topic, values in _FILLED_BEFORE.items():
        if f'"{topic}"' in block.code:
            producer = Producer({"bootstrap.servers": bootstrap})
            for value in values:
                producer.produce(topic, value)
            assert producer.flush(TIMEOUT_S) == 0


def test_the_documents_have_python_blocks_of_every_kind() -> None:
    kinds = {block.kind for block in _blocks()}
    assert kinds == {"none", "broker", "cluster", "spark", "secured", "pytest"}


def _anchor(heading: str) -> str:
    """A heading's anchor, as the site (mkdocs' toc) and GitHub make it."""
    words = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", words)


def test_the_readmes_links_lead_to_pages_and_headings_that_exist() -> None:
    """The site's strict build checks the links between pages; this checks the README's,
    which the site does not contain."""
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if "://" not in link]
    assert local
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.*)$", target.read_text(), re.MULTILINE)
            assert anchor in {_anchor(h) for h in headings}, link


@pytest.mark.parametrize("block", _params("none"))
def test_standalone_block(block: Block) -> None:
    _run(block)


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"schema.registry.listeners": "http://127.0.0.1:0"}


@pytest.mark.integration
@pytest.mark.parametrize("block", _params("broker"))
def test_block_against_a_broker(block: Block, tickwheel_broker: BackgroundBroker) -> None:
    bootstrap = tickwheel_broker.bootstrap_servers
    _fill_topics_it_reads(block, bootstrap)
    _run(block, bootstrap, f"http://127.0.0.1:{tickwheel_broker.schema_registry_ports[0]}")


@pytest.mark.integration
@pytest.mark.parametrize("block", _params("pytest"))
def test_block_of_tests_under_pytest(block: Block, tmp_path: Path) -> None:
    test_file = tmp_path / f"test_block_line_{block.line}.py"
    test_file.write_text(block.code)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PYTEST_TIMEOUT_S,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[str]:
    from cluster.helpers import local_cluster  # noqa: PLC0415 - kazoo only for this tier

    with local_cluster(tmp_path) as cluster:
        yield cluster.bootstrap_servers


@pytest.mark.cluster
@pytest.mark.parametrize("block", _params("cluster"))
def test_block_against_a_cluster(block: Block, three_brokers: str) -> None:
    _run(block, three_brokers)


@pytest.mark.spark
@pytest.mark.parametrize("block", _params("spark"))
def test_block_with_spark(block: Block, tickwheel_broker: BackgroundBroker) -> None:
    registry = f"http://127.0.0.1:{tickwheel_broker.schema_registry_ports[0]}"
    _run(block, tickwheel_broker.bootstrap_servers, registry)


def _document_fence(fence: re.Pattern[str], marker: str) -> str:
    """The one block of ``fence``, in all the documents, that contains ``marker``."""
    found = [
        m.group(1)
        for document in DOCUMENTS
        for m in fence.finditer(document.read_text())
        if marker in m.group(1)
    ]
    assert len(found) == 1, f"expected one block with {marker!r}, found {len(found)}"
    return found[0]


def _moved(text: str, base: Path) -> str:
    for directory, moved in SECURED_DIRS.items():
        text = text.replace(directory, str(base / moved))
    return text


@pytest.fixture
def secured_broker(tmp_path: Path) -> Iterator[str]:
    """The Security page's broker, made by its own commands; yields its address."""
    certificates = _moved(_document_fence(_SHELL_FENCE, "openssl req"), tmp_path)
    subprocess.run(["sh", "-e", "-c", certificates], check=True, capture_output=True)
    text = _document_fence(_PROPERTIES_FENCE, "authorizer.class.name")
    properties = parse_properties(_moved(text.replace(SECURED_ADDRESS, "127.0.0.1:0"), tmp_path))
    Path(properties["log.dirs"]).mkdir()
    with BackgroundBroker(BrokerConfig.from_properties(properties)) as broker:
        yield str(broker.endpoint(SECURED))


@pytest.mark.integration
@pytest.mark.parametrize("block", _params("secured"))
def test_security_walk_through(block: Block, secured_broker: str, tmp_path: Path) -> None:
    code = _moved(block.code.replace(SECURED_ADDRESS, secured_broker), tmp_path)
    _run(Block(block.document, block.line, code))
