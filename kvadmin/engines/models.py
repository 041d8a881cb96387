"""The engine registry: every inference pod whose KV events kvadmin consumes."""

import ipaddress
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from kvadmin.engines import model_names
from kvadmin.model_tokenizer.files import TokenizerUnavailable, cached, tokenizer_files

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def validate_pod_id(value: str) -> None:
    """`{pod_name}.{namespace}`: the identity kthena's router matches its candidate pods by."""
    name, dot, namespace = value.partition(".")
    if not dot or not _DNS_LABEL.match(name) or not _DNS_LABEL.match(namespace):
        raise ValidationError(
            "%(value)r is not {pod_name}.{namespace} with DNS-1123 labels "
            "(lower-case letters, digits and '-', at most 63 characters each)",
            params={"value": value},
        )


def validate_zmq_endpoint(value: str) -> None:
    parts = urlsplit(value)
    if parts.scheme == "ipc" and (parts.netloc or parts.path):
        return
    if parts.scheme == "tcp" and parts.hostname:
        try:
            port = parts.port
        except ValueError:
            port = None
        if port:
            return
    raise ValidationError(
        "%(value)r is not a ZMQ endpoint (tcp://host:port or ipc://path)", params={"value": value}
    )


TOKENIZER_REFUSED = (
    "%(value)r is not an absolute path to a tokenizer.json that loads as a tokenizer, "
    "or a directory holding one"
)
"""Fixed: why the file did not load could repeat what it holds (the path may name any file)."""


def serve_address_problem(value: str) -> str | None:
    """Why `value` is not a serving address `ip:port` (IPv6 in brackets, `[::1]:8000`), the
    form the Gateway API Inference Extension's `x-gateway-destination-endpoint` carries;
    None when it is one."""
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        return "is not ip:port with a port from 1 to 65535"
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        address = ipaddress.ip_address(host[1:-1] if bracketed else host)
    except ValueError:
        return "does not start with an IP address (a gateway sends to addresses, not names)"
    if address.version == 6 and not bracketed:
        return "has an IPv6 address without brackets: write [address]:port"
    return None


def validate_serve_address(value: str) -> None:
    if problem := serve_address_problem(value):
        raise ValidationError("%(value)r %(problem)s", params={"value": value, "problem": problem})


def validate_tokenizer_path(value: str) -> None:
    """An absolute path to a regular tokenizer.json that loads as a tokenizer (with its
    config and template, if any), or to a directory holding one: loaded here, into this
    process's cache."""
    if Path(value).is_absolute() and tokenizer_files(value)[0].is_file():
        try:
            cached(value)
        except TokenizerUnavailable:
            pass
        else:
            return
    raise ValidationError(TOKENIZER_REFUSED, params={"value": value})


def endpoint_for_rank(endpoint: str, rank: int) -> str:
    """Data-parallel rank r publishes on the base port + r (ipc endpoints get a suffix)."""
    if rank == 0:
        return endpoint
    parts = urlsplit(endpoint)
    if parts.scheme == "tcp":
        return f"tcp://{parts.hostname}:{parts.port + rank}"
    return f"{endpoint}-{rank}"


class Engine(models.Model):
    class Kind(models.TextChoices):
        VLLM = "vllm", "vLLM"
        SGLANG = "sglang", "SGLang"

    pod = models.CharField(
        "pod id",
        max_length=127,
        unique=True,
        validators=[validate_pod_id],
        help_text="{pod_name}.{namespace}, as kthena's router names candidate pods.",
    )
    model = models.CharField(
        "served model name",
        max_length=model_names.MAX_LENGTH,
        db_index=True,
        validators=[model_names.validate_model_name],
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.VLLM)
    events_endpoint = models.CharField(max_length=255, validators=[validate_zmq_endpoint])
    replay_endpoint = models.CharField(
        max_length=255, blank=True, validators=[validate_zmq_endpoint]
    )
    topic = models.CharField(max_length=255, blank=True)
    dp_size = models.PositiveSmallIntegerField(
        "data-parallel size", default=1, validators=[MinValueValidator(1), MaxValueValidator(256)]
    )
    block_size = models.PositiveSmallIntegerField(
        default=16, validators=[MinValueValidator(1), MaxValueValidator(1024)]
    )
    http_base_url = models.URLField(
        "HTTP base URL", blank=True, help_text="Where the engine serves /tokenize."
    )
    serve_address = models.CharField(
        "serving address",
        max_length=64,
        blank=True,
        validators=[validate_serve_address],
        help_text="ip:port a gateway sends this engine's inference traffic to (the endpoint "
        "picker names it in x-gateway-destination-endpoint); unique per engine.",
    )
    tokenizer = models.CharField(
        "local tokenizer",
        max_length=1024,
        blank=True,
        validators=[validate_tokenizer_path],
        help_text="The model's Hugging Face tokenizer.json, or the directory holding it (with "
        "tokenizer_config.json and chat_template.jinja, if any): kvadmin then tokenizes this "
        "model's text itself instead of calling /tokenize. Every engine of a model that names "
        "one names the same.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model", "pod"]
        constraints = [
            models.UniqueConstraint(
                fields=["serve_address"],
                condition=~models.Q(serve_address=""),
                name="engine_serve_address_unique",
                violation_error_message="another engine has this serving address",
            )
        ]

    def __str__(self) -> str:
        return self.pod

    def clean(self) -> None:
        """One tokenizer per model: a model's token ids must not depend on which of its
        engines the tokenizer path was read from."""
        if not self.tokenizer:
            return
        other = (
            Engine.objects.filter(model=self.model)
            .exclude(pk=self.pk)
            .exclude(tokenizer="")
            .exclude(tokenizer=self.tokenizer)
            .values_list("pod", "tokenizer")
            .first()
        )
        if other is not None:
            raise ValidationError(
                {
                    "tokenizer": f"{other[0]} serves {self.model} with another tokenizer "
                    f"({other[1]}): every engine of a model names the same one"
                }
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        """A tokenizer path is checked whichever way the engine is saved (the admin and the
        `engines` command validate first; the simulator's registration does not): a path is
        never kept that does not load as a tokenizer."""
        if self.tokenizer:
            validate_tokenizer_path(self.tokenizer)
        super().save(*args, **kwargs)

    def events_endpoint_for(self, rank: int) -> str:
        return endpoint_for_rank(self.events_endpoint, rank)

    def replay_endpoint_for(self, rank: int) -> str | None:
        return endpoint_for_rank(self.replay_endpoint, rank) if self.replay_endpoint else None

    def as_dict(self) -> dict:
        return {
            "pod": self.pod,
            "model": self.model,
            "kind": self.kind,
            "events_endpoint": self.events_endpoint,
            "replay_endpoint": self.replay_endpoint or None,
            "topic": self.topic,
            "dp_size": self.dp_size,
            "block_size": self.block_size,
            "http_base_url": self.http_base_url or None,
            "serve_address": self.serve_address or None,
            "tokenizer": self.tokenizer or None,
            "enabled": self.enabled,
        }
