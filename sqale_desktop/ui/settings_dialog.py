"""The settings dialog: engine, server, hardware, context, sampling, limits, files, theme.

One method builds each group of rows, in the order the form shows them; the engines offered and
what each one needs (a server URL, local hardware) come from ``core.engine_kinds``.

Defaults come from ``core.settings`` (the model card's sampling, a 16k context).  The server's API
key goes to the keyring through ``core.secrets``, never into the settings file; without a keyring
the dialog says the key lasts for this session only.
"""

from __future__ import annotations

import dataclasses

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from sqale_desktop.core import secrets
from sqale_desktop.core.engine_kinds import KINDS, SERVER, kind_of
from sqale_desktop.core.imports import cache_bound
from sqale_desktop.core.providers import DEFAULT_PRICES, PROVIDERS, provider_for
from sqale_desktop.core.runtime import known_gpus
from sqale_desktop.core.settings import LIMITS, Settings
from sqale_desktop.core.units import format_bytes

GPU_LABELS = {"auto": "Automatic", "all": "All layers", "none": "None (CPU only)"}


def _double(name: str, value: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    """A spin box for setting ``name``, bounded by the same limits the settings loader checks."""
    low, high = LIMITS[name]
    box = QDoubleSpinBox()
    box.setRange(low, high)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    box.setValue(value)
    return box


def _int(name: str, value: int, step: int = 1, special: str = "") -> QSpinBox:
    """A spin box for setting ``name``, bounded by the same limits the settings loader checks."""
    low, high = LIMITS[name]
    box = QSpinBox()
    box.setRange(int(low), int(high))
    box.setSingleStep(step)
    if special:
        box.setSpecialValueText(special)
    box.setValue(value)
    return box


def _secret(name: str, placeholder: str, parent: QWidget) -> QLineEdit:
    """A masked field holding the keyring's secret ``name``; a keyring that cannot be read says
    why in the placeholder (the field then starts empty)."""
    field = QLineEdit(parent)
    field.setEchoMode(QLineEdit.EchoMode.Password)
    field.setPlaceholderText(placeholder)
    try:
        field.setText(secrets.get_secret(name) or "")
    except secrets.SecretError as exc:
        field.setPlaceholderText(str(exc))
    return field


class SettingsDialog(QDialog):
    """Edit a copy of the settings; ``result_settings()`` after ``exec()`` returns the new ones."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setMinimumWidth(560)
        self._original = settings
        form = QFormLayout()
        self._engine_rows(form, settings)
        self._secret_rows(form)
        self._hardware_rows(form, settings)
        self._sampling_rows(form, settings)
        self._limit_rows(form, settings)
        self._file_rows(form, settings)
        self._appearance_rows(form, settings)

        defaults = QPushButton("Model card defaults", self)
        defaults.setToolTip("Sampling and context as the model card recommends")
        defaults.clicked.connect(self.reset_sampling)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.addButton(defaults, QDialogButtonBox.ButtonRole.ResetRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.message = QLabel("", self)
        self.message.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.keyring_note)
        layout.addWidget(self.message)
        layout.addWidget(buttons)
        self._engine_changed()

    def _engine_rows(self, form: QFormLayout, settings: Settings) -> None:
        """The engine and the server it may talk to (a provider's preset, URL, model, prices)."""
        self.engine = QComboBox(self)
        for key, kind in KINDS.items():
            if kind.offered or key == settings.engine:  # one the dialog does not offer, if chosen
                self.engine.addItem(kind.label, key)
        self.engine.setCurrentIndex(self.engine.findData(settings.engine))
        self.engine.currentIndexChanged.connect(self._engine_changed)
        form.addRow("Engine", self.engine)

        # A hosted provider as a preset: it fills in the URL, the model id and the prices it
        # documents, all still editable; "Custom" leaves them as they are.
        self.provider = QComboBox(self)
        self.provider.setObjectName("provider")
        self.provider.addItem("Custom server", "")
        for provider in PROVIDERS.values():
            self.provider.addItem(f"{provider.name} ({provider.model})", provider.key)
        chosen = provider_for(settings.server_url)
        self.provider.setCurrentIndex(max(0, self.provider.findData(chosen.key if chosen else "")))
        self.provider.activated.connect(lambda _i: self._provider_chosen())
        form.addRow("Server", self.provider)
        self.server_url = QLineEdit(settings.server_url, self)
        form.addRow("Server URL", self.server_url)
        self.server_model = QLineEdit(settings.server_model, self)
        self.server_model.setObjectName("serverModel")
        self.server_model.setPlaceholderText("(the server's first model)")
        form.addRow("Model id", self.server_model)
        form.addRow("Prices", self._prices_row(settings))

    def _secret_rows(self, form: QFormLayout) -> None:
        """The server's API key and the Hugging Face token: read from and kept in the keyring."""
        self.api_key = _secret(secrets.SERVER_API_KEY, "(none)", self)
        form.addRow("API key", self.api_key)
        # The token for gated or private Hugging Face repositories (the hub's errors point here).
        self.hub_token = _secret(secrets.HF_TOKEN, "(none: public models only)", self)
        form.addRow("Hugging Face token", self.hub_token)
        self.keyring_note = QLabel(secrets.keyring_message() or "Stored in the system keyring.", self)
        self.keyring_note.setWordWrap(True)
        self.keyring_note.setObjectName("keyringNote")

    def _hardware_rows(self, form: QFormLayout, settings: Settings) -> None:
        """Where a local model runs: GPU layers and device, CPU threads, speculative decoding."""
        gpu_row = QWidget(self)
        gpu_layout = QHBoxLayout(gpu_row)
        gpu_layout.setContentsMargins(0, 0, 0, 0)
        self.gpu_mode = QComboBox(gpu_row)
        for key, label in GPU_LABELS.items():
            self.gpu_mode.addItem(label, key)
        self.gpu_mode.addItem("This many layers:", "count")
        layers = settings.gpu_layers if isinstance(settings.gpu_layers, int) else 0
        self.gpu_layers = _int("gpu_layers", layers)
        mode = "count" if isinstance(settings.gpu_layers, int) else settings.gpu_layers
        self.gpu_mode.setCurrentIndex(self.gpu_mode.findData(mode))
        self.gpu_mode.currentIndexChanged.connect(
            lambda _i: self.gpu_layers.setEnabled(self.gpu_mode.currentData() == "count")
        )
        self.gpu_layers.setEnabled(mode == "count")
        gpu_layout.addWidget(self.gpu_mode)
        gpu_layout.addWidget(self.gpu_layers)
        form.addRow("GPU layers", gpu_row)
        self.gpu_device = QComboBox(self)
        self.gpu_device.addItem("Automatic (the most free memory)", "")
        for name, label in known_gpus():
            self.gpu_device.addItem(label, name)
        if settings.gpu_device and self.gpu_device.findData(settings.gpu_device) < 0:
            self.gpu_device.addItem(f"{settings.gpu_device} (not found now)", settings.gpu_device)
        self.gpu_device.setCurrentIndex(max(self.gpu_device.findData(settings.gpu_device), 0))
        self.gpu_device.setToolTip(
            "Where there are several GPUs, the one the model is offloaded to. The list shows the "
            "devices llama.cpp found when the model last loaded."
        )
        form.addRow("GPU device", self.gpu_device)
        self.threads = _int("n_threads", settings.n_threads, special="Automatic (one per core)")
        self.threads.setToolTip(
            "Automatic uses one thread per physical core, the fastest on an idle computer, and "
            "decodes with one thread fewer while another program keeps a core busy (both measured "
            "by benchmarks/engine.py). A number set here is used as it is, busy or not."
        )
        form.addRow("CPU threads", self.threads)
        self.speculation = QComboBox(self)
        for key, label in (("auto", "Automatic"), ("on", "On"), ("off", "Off")):
            self.speculation.addItem(label, key)
        self.speculation.setCurrentIndex(self.speculation.findData(settings.speculation))
        self.speculation.setToolTip(
            "Speculative decoding: proposes text the episode already contains (table and column "
            "names, values, SQL) and checks it in one pass, without changing what the model writes. "
            "Automatic stops proposing where it does not pay on this computer."
        )
        form.addRow("Speculative decoding", self.speculation)

    def _sampling_rows(self, form: QFormLayout, settings: Settings) -> None:
        """The context and the sampling, as the model card recommends them by default."""
        self.n_ctx = _int("n_ctx", settings.n_ctx, 1024)
        form.addRow("Context (tokens)", self.n_ctx)
        self.temperature = _double("temperature", settings.temperature, 0.05)
        form.addRow("Temperature", self.temperature)
        self.top_p = _double("top_p", settings.top_p, 0.05)
        form.addRow("Top-p", self.top_p)
        self.top_k = _int("top_k", settings.top_k, special="Off")
        form.addRow("Top-k", self.top_k)
        self.min_p = _double("min_p", settings.min_p, 0.01)
        form.addRow("Min-p", self.min_p)

    def _limit_rows(self, form: QFormLayout, settings: Settings) -> None:
        """What a query, a turn's tools and an answer may take."""
        self.time_limit = _double("query_time_limit_s", settings.query_time_limit_s, 1.0, 1)
        self.time_limit.setSuffix(" s")
        form.addRow("Query time limit", self.time_limit)
        self.tool_budget = _double("turn_tool_time_s", settings.turn_tool_time_s, 5.0, 0)
        self.tool_budget.setSuffix(" s")
        self.tool_budget.setToolTip(
            "The time the tool calls of one agent turn share; a call still running when it is "
            "spent is stopped, and the model is told so."
        )
        form.addRow("Tool time per turn", self.tool_budget)
        self.memory_limit = _int("query_memory_limit_mb", settings.query_memory_limit_mb, 256)
        self.memory_limit.setSuffix(" MB")
        self.memory_limit.setToolTip("Memory a query's database worker may use before the query is stopped")
        form.addRow("Query memory limit", self.memory_limit)
        self.max_rows = _int("max_rows", settings.max_rows, 100)
        form.addRow("Max rows in an answer", self.max_rows)

    def _file_rows(self, form: QFormLayout, settings: Settings) -> None:
        """The imported files' cache and size limit, and how exports treat formulas."""
        form.addRow("Import cache", self._cache_row(settings))
        self.write_limit = _int("import_write_limit_mb", settings.import_write_limit_mb, 256)
        self.write_limit.setSuffix(" MB")
        self.write_limit.setToolTip(
            "The most one imported file may grow to in the cache. A small compressed file can "
            "hold gigabytes; past this size its import stops with a message and keeps nothing."
        )
        form.addRow("Import size limit", self.write_limit)
        self.csv_formulas = QCheckBox("Sanitize formulas in CSV exports", self)
        self.csv_formulas.setChecked(settings.csv_formulas == "sanitize")
        self.csv_formulas.setToolTip(
            "Cells starting with =, +, -, @ (or a tab or carriage return) get a leading ' so a "
            "spreadsheet shows them as text instead of running them. Off: the data round-trips as it is."
        )
        form.addRow("Exports", self.csv_formulas)

    def _appearance_rows(self, form: QFormLayout, settings: Settings) -> None:
        """The theme."""
        self.theme = QComboBox(self)
        for key in ("system", "light", "dark"):
            self.theme.addItem(key.capitalize() if key != "system" else "Follow the system", key)
        self.theme.setCurrentIndex(self.theme.findData(settings.theme))
        form.addRow("Appearance", self.theme)

    def _cache_row(self, settings: Settings) -> QWidget:
        """The imported files' cache: its bound, what it holds now, and Clear."""
        row = QWidget(self)
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        self.cache_limit = _int("import_cache_limit_mb", settings.import_cache_limit_mb, 256)
        self.cache_limit.setSuffix(" MB")
        self.cache_limit.setToolTip(
            "Data files (CSV, Excel, Parquet...) are imported into SQLite files in the app's cache "
            "and reused while the source is unchanged. Past this size the imports used least "
            "recently are removed (never one that is open); they are made again when opened."
        )
        self.cache_used = QLabel(row)
        self.cache_used.setObjectName("cacheUsed")
        self.clear_cache = QPushButton("Clear", row)
        self.clear_cache.setToolTip("Remove every import that is not open now")
        self.clear_cache.clicked.connect(self._clear_cache)
        layout.addWidget(self.cache_limit)
        layout.addWidget(self.cache_used, 1)
        layout.addWidget(self.clear_cache)
        self._show_cache(cache_bound.cache_size())
        return row

    def _show_cache(self, state: cache_bound.CacheState, note: str = "") -> None:
        imports = f"{state.imports:,} import" + ("" if state.imports == 1 else "s")
        self.cache_used.setText(f"{format_bytes(state.bytes)} in use ({imports}){note}")

    def _clear_cache(self) -> None:
        state = cache_bound.clear()
        note = f"; {format_bytes(state.freed)} freed"
        if state.kept_open:
            note += f", {state.kept_open:,} open kept"
        self._show_cache(state, note)

    def _prices_row(self, settings: Settings) -> QWidget:
        """Dollars per million tokens of a server's reported usage, for each answer's cost."""
        row = QWidget(self)
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        self.price_input = _double("price_input", settings.price_input, 0.01, 3)
        self.price_cached_input = _double("price_cached_input", settings.price_cached_input, 0.01, 3)
        self.price_output = _double("price_output", settings.price_output, 0.01, 3)
        for label, box in (
            ("input $", self.price_input),
            ("cached $", self.price_cached_input),
            ("output $", self.price_output),
        ):
            layout.addWidget(QLabel(label, row))
            layout.addWidget(box)
        layout.addWidget(QLabel("per million tokens", row), 1)
        row.setToolTip(
            f"Each answer from a server shows the tokens it reported and their cost at these prices. "
            f"Defaults: ${DEFAULT_PRICES.input:g} / ${DEFAULT_PRICES.cached_input:g} / "
            f"${DEFAULT_PRICES.output:g}, from {PROVIDERS['featherless'].source}; set 0 for a server "
            "of your own."
        )
        return row

    def _provider_chosen(self) -> None:
        provider = PROVIDERS.get(str(self.provider.currentData() or ""))
        if provider is None:
            return
        self.engine.setCurrentIndex(self.engine.findData(SERVER))
        self.server_url.setText(provider.base_url)
        self.server_model.setText(provider.model)
        self.price_input.setValue(provider.prices.input)
        self.price_cached_input.setValue(provider.prices.cached_input)
        self.price_output.setValue(provider.prices.output)
        self.n_ctx.setValue(min(self.n_ctx.value(), provider.context))  # what it serves
        self.message.setText(
            f"{provider.name}: its API at {provider.base_url}, model {provider.model}, a "
            f"{provider.context // 1024}k context. Enter your {provider.name} API key above."
        )

    def _engine_changed(self) -> None:
        kind = kind_of(str(self.engine.currentData()))
        server = kind is not None and kind.server
        server_widgets: tuple[QWidget, ...] = (self.server_url, self.api_key, self.server_model)
        for widget in server_widgets:
            widget.setEnabled(kind is not None and kind.needs_url)
        local_widgets: tuple[QWidget, ...] = (self.gpu_mode, self.gpu_device, self.threads, self.speculation)
        for widget in local_widgets:
            widget.setEnabled(not server)
        self.gpu_layers.setEnabled(not server and self.gpu_mode.currentData() == "count")

    def reset_sampling(self) -> None:
        defaults = Settings()
        self.temperature.setValue(defaults.temperature)
        self.top_p.setValue(defaults.top_p)
        self.top_k.setValue(defaults.top_k)
        self.min_p.setValue(defaults.min_p)
        self.n_ctx.setValue(defaults.n_ctx)

    def accept(self) -> None:
        """Store the API key and the hub token (keyring, or memory with a note) and close."""
        entered = {
            secrets.SERVER_API_KEY: self.api_key.text().strip(),
            secrets.HF_TOKEN: self.hub_token.text().strip(),
        }
        in_keyring = True
        try:
            for name, value in entered.items():
                in_keyring = secrets.set_secret(name, value) and in_keyring
        except secrets.SecretError as exc:
            self.message.setText(str(exc))
            return
        if any(entered.values()) and not in_keyring:
            self.message.setText("No keyring: the API key and token are kept for this session only.")
        super().accept()

    def result_settings(self) -> Settings:
        mode = self.gpu_mode.currentData()
        gpu = self.gpu_layers.value() if mode == "count" else mode
        return dataclasses.replace(
            self._original,
            engine=self.engine.currentData(),
            server_url=self.server_url.text().strip() or self._original.server_url,
            server_model=self.server_model.text().strip(),
            price_input=round(self.price_input.value(), 6),
            price_cached_input=round(self.price_cached_input.value(), 6),
            price_output=round(self.price_output.value(), 6),
            gpu_layers=gpu,
            gpu_device=str(self.gpu_device.currentData() or ""),
            n_threads=self.threads.value(),
            n_ctx=self.n_ctx.value(),
            temperature=round(self.temperature.value(), 4),
            top_p=round(self.top_p.value(), 4),
            top_k=self.top_k.value(),
            min_p=round(self.min_p.value(), 4),
            query_time_limit_s=round(self.time_limit.value(), 3),
            turn_tool_time_s=round(self.tool_budget.value(), 3),
            csv_formulas="sanitize" if self.csv_formulas.isChecked() else "keep",
            query_memory_limit_mb=self.memory_limit.value(),
            max_rows=self.max_rows.value(),
            import_cache_limit_mb=self.cache_limit.value(),
            import_write_limit_mb=self.write_limit.value(),
            theme=self.theme.currentData(),
            speculation=self.speculation.currentData(),
        )
