"""`make run`: the whole stack under one supervisor, started in order and stopped in reverse.

1. A second `make run` finds the first one (var/stack.json names its processes), says where
   kvadmin runs and exits with status 1; processes an earlier supervisor left behind when it
   was killed are stopped. Every port the stack will bind (the web server's, the embedded
   Redis's, each simulated pod's) is checked first: a taken one is named, and nothing starts.
2. The Procfile's processes start in its order, each once what it needs answers: the worker,
   beat, web and the endpoint picker once Redis answers with its data loaded, Envoy (the
   demo's gateway) once the picker serves, the simulated fleet once the web server answers.
3. Once everything is up, the login is printed last, in a box.
4. A process that exits is started again after a growing pause: no one process takes the
   others down.
5. Ctrl-C or SIGTERM stops them in reverse order, the fleet first and Redis last, and the
   supervisor exits with status 0.

Each process runs in its own session, so a Ctrl-C reaches the supervisor alone.
"""

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from string import Template
from urllib.parse import urlsplit

from honcho.colour import get_colours
from honcho.environ import parse_procfile
from honcho.printer import Message, Printer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
import django  # noqa: E402
from django.conf import settings  # noqa: E402

from kvadmin.conf import knob  # noqa: E402
from kvadmin.dashboard.first_admin import password_file, saved_login  # noqa: E402
from kvadmin.fleet.fleet import READY_LINE as FLEET_READY_LINE  # noqa: E402
from kvadmin.fleet.fleet import plan_fleet, pod_ports  # noqa: E402
from kvadmin.gateway import READY_LINE as PICKER_READY_LINE  # noqa: E402
from kvadmin.index.groups import index_groups  # noqa: E402
from kvadmin.redis_server import compact, embedded, wait_until_ready  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NEEDS = {"worker": "redis", "beat": "redis", "web": "redis", "picker": "redis", "fleet": "web"}
READY_LINES = {"fleet": FLEET_READY_LINE, "picker": PICKER_READY_LINE}
PORTS = {"picker": 9002, "gateway": 8080}
"""The ports the Procfile and deploy/envoy/envoy.yaml give the picker and Envoy (127.0.0.1)."""
STOP_SECONDS = 15.0
LONGEST_PAUSE = 30.0


@dataclass
class Service:
    name: str
    command: list[str]
    colour: str
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    pause: float = 1.0
    restart_at: float | None = None
    output: list[threading.Thread] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    """Set when the process prints READY_LINES[name]."""


def state_file() -> Path:
    return settings.VAR_DIR / "stack.json"


def _ours(pid: int) -> bool:
    """A live process started in this checkout (not a recycled pid)."""
    try:
        return Path(f"/proc/{pid}/cwd").resolve() == ROOT
    except OSError:
        return False


def _earlier_run() -> dict:
    try:
        return json.loads(state_file().read_text())
    except (FileNotFoundError, ValueError):
        return {}


def running_supervisor() -> int | None:
    """The pid of this checkout's running `make run`, if one runs."""
    pid = _earlier_run().get("supervisor", 0)
    return pid if _ours(pid) else None


def _port_taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def fleet_ports(command: list[str]) -> dict[int, str]:
    """The ports the Procfile's fleet command (`python manage.py simulate ...`) binds, and the
    pod binding each: read with simulate's own parser and fleet plan, so they cannot drift."""
    from kvadmin.fleet.management.commands.simulate import Command

    options = vars(Command().create_parser("manage.py", "simulate").parse_args(command[3:]))
    kinds = [kind.strip() for kind in options["kind"].split(",") if kind.strip()]
    configs = plan_fleet(
        options["pods"], kinds, options["base_port"], options["http_port"],
        dp_size=options["dp_size"],
    )  # fmt: skip
    return {port: f"the demo fleet's {c.name}" for c in configs for port in pod_ports(c)}


def web_url() -> str:
    return f"http://127.0.0.1:{knob('PORT')}"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


class Stack:
    def __init__(self, names: list[str]) -> None:
        bin_dir = str(Path(sys.executable).parent)
        self.env = os.environ | {
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
            "KVADMIN_PORT": str(knob("PORT")),
            "KVADMIN_VAR_DIR": str(settings.VAR_DIR),
        }
        procfile = parse_procfile((ROOT / "Procfile").read_text()).processes
        colours = get_colours()
        self.services = [
            Service(name, shlex.split(Template(procfile[name]).substitute(self.env)), next(colours))
            for name in names
        ]
        self.embedded_redis = "redis" in names
        self.printer = Printer(sys.stdout, width=max(len(name) for name in names + ["system"]))
        self.lock = threading.Lock()

    def say(self, text: str, name: str = "system", colour: str | None = None) -> None:
        with self.lock:
            self.printer.write(Message("line", text, datetime.now(), name, colour))

    # 1. One stack per checkout.
    def refuse_a_second_one(self) -> int | None:
        """An exit status when this stack must not start, else None."""
        if pid := running_supervisor():
            # Not started, so not a success: a script that runs `make run` must see that.
            print(f"kvadmin is already running at {web_url()} (supervisor pid {pid})")
            return 1
        left = [pid for pid in _earlier_run().get("processes", []) if _ours(pid)]
        if left:
            self.say(f"stopping {len(left)} processes an earlier run left behind")
            for pid in left:
                _stop_leftover(pid)
        taken = {port: user for port, user in self.ports().items() if _port_taken(port)}
        for port, user in sorted(taken.items()):
            print(
                f"kvadmin: port {port} on 127.0.0.1 ({user}) is taken by another program",
                file=sys.stderr,
            )
        if taken:
            print(
                "kvadmin: nothing was started; stop what holds the port"
                f"{'s' if len(taken) > 1 else ''} and run again (or: KVADMIN_PORT=<port> for the "
                "web server, REDIS_URL=<a running Redis>, KVADMIN_DEMO=false without the fleet)",
                file=sys.stderr,
            )
            return 1
        return None

    def ports(self) -> dict[int, str]:
        """Every port this stack will bind on 127.0.0.1, and what binds it."""
        ports = {knob("PORT"): "the web server, KVADMIN_PORT"}
        if self.embedded_redis:
            ports[urlsplit(settings.REDIS_URL).port or 6379] = "the embedded Redis"
        for service in self.services:
            if service.name == "fleet":
                ports |= fleet_ports(service.command)
            elif service.name in PORTS:
                ports[PORTS[service.name]] = f"the {service.name} (deploy/envoy/envoy.yaml)"
        return ports

    def _remember(self) -> None:
        pids = [s.process.pid for s in self.services if s.process and s.process.poll() is None]
        # Written aside and renamed: a reader (a second `make run`, `make reset-demo`) never
        # sees half a file.
        scratch = state_file().with_suffix(".new")
        scratch.write_text(json.dumps({"supervisor": os.getpid(), "processes": pids}))
        scratch.replace(state_file())

    # 2. Start in order.
    def _wait_for(self, need: str) -> None:
        if need == "redis":
            wait_until_ready(settings.REDIS_URL, knob("STARTUP_TIMEOUT"), "system")
            for group in index_groups():
                wait_until_ready(group.url, knob("STARTUP_TIMEOUT"), "system")
            from kvadmin.engines.index_groups import require_ready  # needs django.setup()

            require_ready("system")
            return
        deadline = time.monotonic() + knob("STARTUP_TIMEOUT")
        while not _answers(f"{web_url()}/healthz"):
            if time.monotonic() > deadline:
                raise SystemExit(f"kvadmin: the web server did not answer on {web_url()}")
            time.sleep(0.2)

    def start(self, service: Service) -> None:
        service.process = subprocess.Popen(
            service.command,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        service.started_at = time.monotonic()
        service.restart_at = None
        reader = threading.Thread(target=self._relay, args=(service, service.process), daemon=True)
        reader.start()
        service.output.append(reader)
        self._remember()

    def _relay(self, service: Service, process: subprocess.Popen) -> None:
        assert process.stdout is not None
        ready_line = READY_LINES.get(service.name)
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.say(line, service.name, service.colour)
            if ready_line and line.startswith(ready_line):
                service.ready.set()

    def start_all(self) -> None:
        for service in self.services:
            if need := NEEDS.get(service.name):
                self._wait_for(need)
            self.start(service)
            if service.name == "redis":
                self._wait_for("redis")
                compact(settings.REDIS_URL)
            if service.name in READY_LINES and not service.ready.wait(knob("STARTUP_TIMEOUT")):
                self.say(f"{service.name} did not say it is up; going on")

    # 3. The login, last.
    def banner(self) -> None:
        login = saved_login()
        if login:
            lines = [
                f"kvadmin is running at {web_url()}",
                f"log in as {login[0]!r} with password {login[1]}",
                f"(kept in {password_file().relative_to(ROOT)} until you change it)",
            ]
        else:
            lines = [
                f"kvadmin is running at {web_url()}",
                "log in with your admin user; `make admin-password` sets a new password",
            ]
        lines.append("Ctrl-C stops everything")
        width = max(map(len, lines))
        edge = "+" + "-" * (width + 2) + "+"
        box = [edge, *(f"| {line.ljust(width)} |" for line in lines), edge]
        with self.lock:
            print("\n" + "\n".join(box) + "\n", flush=True)

    # 4. Keep them running.
    def watch(self) -> None:
        while True:
            now = time.monotonic()
            for service in self.services:
                process = service.process
                if service.restart_at is not None and now >= service.restart_at:
                    self.start(service)
                elif process and service.restart_at is None and process.poll() is not None:
                    if now - service.started_at > 60:
                        service.pause = 1.0
                    self.say(
                        f"{service.name} exited with status {process.returncode}; "
                        f"starting it again in {service.pause:.0f} s"
                    )
                    service.restart_at = now + service.pause
                    service.pause = min(service.pause * 2, LONGEST_PAUSE)
            time.sleep(0.2)

    # 5. Stop in reverse order.
    def stop_all(self) -> None:
        for service in reversed(self.services):
            process = service.process
            if process and process.poll() is None:
                self.say(f"stopping {service.name}")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    self.say(f"{service.name} did not stop in {STOP_SECONDS:.0f} s: killed")
                with contextlib.suppress(ProcessLookupError):  # and whatever it left behind
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            for reader in service.output:
                reader.join(timeout=1)
        state_file().unlink(missing_ok=True)


def _stop_leftover(pid: int) -> None:
    """Stop the process group of an earlier supervisor's process (not our child)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            os.killpg(pid, 0)
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    django.setup()
    names = ["redis"] if embedded() else []
    names += ["worker", "beat", "web"]
    if knob("DEMO"):
        # The endpoint picker and Envoy in front of the demo fleet (its config lists the
        # fleet's pods), asking it: the fleet's traffic goes through the gateway.
        names += ["picker", "gateway", "fleet"]
    stack = Stack(names)
    if (status := stack.refuse_a_second_one()) is not None:
        return status
    # Set both: a shell that starts a job in the background makes it ignore SIGINT.
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        stack.start_all()
        stack.banner()
        stack.watch()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
