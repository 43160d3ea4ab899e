"""The demo database the app opens on first run: a populated shop, generated here, never downloaded.

Why generate it: the app has to show something useful before the user owns a database or a model,
and the model card's own example question ("Which supplier shipped the most back-ordered items last
quarter?") should have a real answer.  A seeded ``random.Random`` makes the file identical on every
machine, so the answer is the same for everyone and tests can reason about it.

How "last quarter" is made meaningful: the data is a snapshot taken on :data:`DEMO_AS_OF`
(2025-12-31, the last day of a quarter).  Orders span the two years before it; items whose shipment
would fall after it are still waiting, so the newest ``shipped_date`` lies in Q4 2025, and "the last
quarter" means October to December 2025 whichever way one reads it (the most recent quarter in the
data, or the last full quarter before the snapshot).  One supplier (Harbor & Hale) runs into stock
trouble in the second half of 2025, so the last-quarter answer differs from the all-time one: a
query that ignores the date filter gets a different, wrong supplier.

The ``CREATE TABLE`` statements carry SQL comments for people reading the schema in the app (the
agent's ``describe_table`` normalises the statement and may drop them; the column names and CHECK
constraints alone say what the values mean).

The file is written to a temporary name and renamed into place, so a crash never leaves a half
database behind, and it is regenerated when missing or when its ``PRAGMA user_version`` differs from
:data:`DEMO_SCHEMA_VERSION` (bump it whenever the generator's output changes).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import os
import random
import sqlite3
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from sqale_desktop.core import paths

DEMO_SCHEMA_VERSION = 1
"""``PRAGMA user_version`` of a current demo file; bump when the schema or the data changes."""

DEMO_APPLICATION_ID = 0x5351_4450  # "SQDP": marks the file as ours (PRAGMA application_id)
DEMO_AS_OF = date(2025, 12, 31)
"""The day the snapshot was taken: nothing in the data happens after it."""
DEMO_START = date(2024, 1, 1)
DEMO_SEED = 20251231

_TROUBLED_SUPPLIER = "Harbor & Hale"
_TROUBLE_STARTS = date(2025, 7, 1)


@dataclass(frozen=True)
class DemoQuestion:
    """A question the demo database answers, with a reference query (for suggestions and smoke tests)."""

    question: str
    sql: str


DEMO_QUESTIONS: tuple[DemoQuestion, ...] = (
    DemoQuestion(
        "Which supplier shipped the most back-ordered items last quarter?",
        "SELECT s.name, COUNT(*) AS backordered_items_shipped\n"
        "FROM shipments AS sh\n"
        "JOIN suppliers AS s ON s.supplier_id = sh.supplier_id\n"
        "JOIN order_items AS oi ON oi.order_item_id = sh.order_item_id\n"
        "WHERE oi.backordered = 1 AND sh.shipped_date BETWEEN '2025-10-01' AND '2025-12-31'\n"
        "GROUP BY s.supplier_id\n"
        "ORDER BY backordered_items_shipped DESC\n"
        "LIMIT 1",
    ),
    DemoQuestion(
        "How many customers placed more than three orders in 2024?",
        "SELECT COUNT(*) FROM (\n"
        "  SELECT customer_id FROM orders\n"
        "  WHERE order_date BETWEEN '2024-01-01' AND '2024-12-31'\n"
        "  GROUP BY customer_id HAVING COUNT(*) > 3\n"
        ")",
    ),
    DemoQuestion(
        "What was the revenue of each product category in 2025?",
        "SELECT p.category, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue\n"
        "FROM order_items AS oi\n"
        "JOIN orders AS o ON o.order_id = oi.order_id\n"
        "JOIN products AS p ON p.product_id = oi.product_id\n"
        "WHERE o.order_date BETWEEN '2025-01-01' AND '2025-12-31' AND oi.status <> 'cancelled'\n"
        "GROUP BY p.category\n"
        "ORDER BY revenue DESC",
    ),
    DemoQuestion(
        "What is the average delivery time in days for each carrier?",
        "SELECT carrier, ROUND(AVG(julianday(delivered_date) - julianday(shipped_date)), 1) AS avg_days\n"
        "FROM shipments\n"
        "WHERE delivered_date IS NOT NULL\n"
        "GROUP BY carrier\n"
        "ORDER BY avg_days",
    ),
    DemoQuestion(
        "Which customers still have items waiting for stock?",
        "SELECT DISTINCT c.first_name, c.last_name, c.email\n"
        "FROM customers AS c\n"
        "JOIN orders AS o ON o.customer_id = c.customer_id\n"
        "JOIN order_items AS oi ON oi.order_id = o.order_id\n"
        "WHERE oi.status = 'awaiting_stock'\n"
        "ORDER BY c.last_name, c.first_name",
    ),
)

SCHEMA = """
CREATE TABLE suppliers (
    supplier_id   INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    country       TEXT NOT NULL,
    contact_email TEXT NOT NULL
);

CREATE TABLE products (
    product_id     INTEGER PRIMARY KEY,
    sku            TEXT NOT NULL UNIQUE,
    name           TEXT NOT NULL,
    category       TEXT NOT NULL,
    unit_price     REAL NOT NULL CHECK (unit_price > 0),  -- list price in USD
    units_in_stock INTEGER NOT NULL CHECK (units_in_stock >= 0)  -- as of the snapshot date
);

CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    city        TEXT NOT NULL,
    country     TEXT NOT NULL,
    signup_date TEXT NOT NULL  -- ISO date, YYYY-MM-DD
);

CREATE TABLE orders (
    order_id    INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (customer_id),
    order_date  TEXT NOT NULL,  -- ISO date, YYYY-MM-DD
    -- processing: some items not shipped yet; shipped: all shipped; completed: all delivered
    status      TEXT NOT NULL CHECK (status IN ('processing', 'shipped', 'completed', 'cancelled'))
);

CREATE TABLE order_items (
    order_item_id INTEGER PRIMARY KEY,
    order_id      INTEGER NOT NULL REFERENCES orders (order_id),
    product_id    INTEGER NOT NULL REFERENCES products (product_id),
    quantity      INTEGER NOT NULL CHECK (quantity > 0),
    unit_price    REAL NOT NULL CHECK (unit_price > 0),  -- price paid per unit, after any discount
    -- 1 when the product was out of stock when ordered; stays 1 after the item finally ships
    backordered   INTEGER NOT NULL DEFAULT 0 CHECK (backordered IN (0, 1)),
    status        TEXT NOT NULL
        CHECK (status IN ('processing', 'awaiting_stock', 'shipped', 'delivered', 'cancelled'))
);

-- one shipment per shipped order item, sent by whichever supplier fulfilled it
CREATE TABLE shipments (
    shipment_id     INTEGER PRIMARY KEY,
    order_item_id   INTEGER NOT NULL UNIQUE REFERENCES order_items (order_item_id),
    supplier_id     INTEGER NOT NULL REFERENCES suppliers (supplier_id),
    carrier         TEXT NOT NULL,
    tracking_number TEXT NOT NULL UNIQUE,
    shipped_date    TEXT NOT NULL,  -- ISO date, YYYY-MM-DD
    delivered_date  TEXT            -- NULL while in transit
);

CREATE INDEX orders_customer ON orders (customer_id);
CREATE INDEX orders_date ON orders (order_date);
CREATE INDEX order_items_order ON order_items (order_id);
CREATE INDEX order_items_product ON order_items (product_id);
CREATE INDEX shipments_supplier ON shipments (supplier_id);
CREATE INDEX shipments_shipped ON shipments (shipped_date);
"""

# (name, country, share of shipments, back-order rate in normal times)
_SUPPLIERS: tuple[tuple[str, str, float, float], ...] = (
    ("Acme Industrial Supply", "United States", 18, 0.085),
    ("Borealis Trading Co.", "Canada", 9, 0.040),
    ("Cascade Components", "United States", 11, 0.050),
    ("Delta Wholesale", "United Kingdom", 8, 0.035),
    ("Everest Distribution", "India", 7, 0.060),
    ("Fjord Logistics", "Norway", 5, 0.030),
    ("Granite Goods Ltd", "Ireland", 6, 0.045),
    (_TROUBLED_SUPPLIER, "United States", 8, 0.035),
    ("Iberia Partners", "Spain", 7, 0.040),
    ("Jade River Imports", "China", 10, 0.055),
    ("Kestrel Supply", "Australia", 5, 0.050),
    ("Lumen Sourcing", "Germany", 6, 0.040),
)
_TROUBLE_RATE = 0.40

_CATALOG: dict[str, tuple[tuple[str, ...], tuple[float, float]]] = {
    "Electronics": (("Headphones", "Power Bank", "USB-C Hub", "Webcam", "Smart Plug", "Speaker"), (15, 180)),
    "Home & Kitchen": (
        ("Kettle", "Blender", "Knife Set", "Cutting Board", "Coffee Grinder", "Toaster"),
        (9, 140),
    ),
    "Office": (("Desk Lamp", "Notebook", "Monitor Stand", "Stapler", "Office Chair", "Whiteboard"), (4, 260)),
    "Outdoor": (("Tent", "Sleeping Bag", "Headlamp", "Water Bottle", "Camping Stove", "Backpack"), (8, 320)),
    "Toys": (("Puzzle", "Building Blocks", "Kite", "Board Game", "Plush Bear", "Train Set"), (6, 90)),
    "Sports": (
        ("Yoga Mat", "Dumbbell Set", "Jump Rope", "Tennis Racket", "Football", "Cycling Gloves"),
        (7, 210),
    ),
}
_STYLES = ("Classic", "Pro", "Compact", "Deluxe", "Eco", "Travel", "Ultra")

_FIRST_NAMES = (
    "Ava",
    "Ben",
    "Chloe",
    "Daniel",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Isabel",
    "Jonas",
    "Kira",
    "Liam",
    "Maya",
    "Noah",
    "Olivia",
    "Pavel",
    "Quinn",
    "Rosa",
    "Samir",
    "Tara",
    "Umar",
    "Vera",
    "Wei",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Amir",
    "Bianca",
    "Carlos",
    "Dana",
    "Emil",
    "Fatima",
    "Gabriel",
    "Hanna",
    "Ivan",
    "Julia",
)
_LAST_NAMES = (
    "Anders",
    "Brown",
    "Costa",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Hughes",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lopez",
    "Meyer",
    "Nakamura",
    "Okafor",
    "Patel",
    "Quint",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Usman",
    "Varga",
    "Walsh",
    "Xu",
    "Yilmaz",
    "Zimmer",
    "Novak",
    "Silva",
    "Berg",
    "Moreau",
)
_CITIES = (
    ("Seattle", "United States"),
    ("Austin", "United States"),
    ("Boston", "United States"),
    ("Chicago", "United States"),
    ("Toronto", "Canada"),
    ("Vancouver", "Canada"),
    ("London", "United Kingdom"),
    ("Manchester", "United Kingdom"),
    ("Dublin", "Ireland"),
    ("Berlin", "Germany"),
    ("Munich", "Germany"),
    ("Paris", "France"),
    ("Lyon", "France"),
    ("Madrid", "Spain"),
    ("Amsterdam", "Netherlands"),
    ("Oslo", "Norway"),
    ("Sydney", "Australia"),
    ("Melbourne", "Australia"),
    ("Tokyo", "Japan"),
    ("Singapore", "Singapore"),
)
_CARRIERS = (("UPS", 3, 2), ("FedEx", 2, 2), ("DHL", 4, 3), ("USPS", 4, 4), ("Royal Mail", 3, 3))
# (carrier, minimum transit days, extra random days)

_N_CUSTOMERS = 1500


def default_demo_path() -> Path:
    """Where the app keeps its demo database: ``<data dir>/demo/shop.sqlite``."""
    return paths.data_dir() / "demo" / "shop.sqlite"


def is_demo_database(path: Path) -> bool:
    """Whether ``path`` is the app's own demo database (its example questions apply to it)."""
    try:
        return path.resolve() == default_demo_path().resolve()
    except OSError:
        return False


def ensure_demo_database(path: Path | None = None) -> Path:
    """Return the path of a current demo database, generating it first when missing or outdated.

    Outdated means its ``user_version`` or ``application_id`` differs from this generator's, or the
    file is not a readable SQLite database at all.  Generation takes well under a second.
    """
    target = default_demo_path() if path is None else Path(path)
    if _is_current(target):
        return target
    return regenerate_demo_database(target)


def regenerate_demo_database(target: Path) -> Path:
    """Generate the demo database into ``target`` unconditionally, replacing any file there atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # A unique name in the same folder (so the rename is atomic) that SQLite creates itself, with the
    # user's usual permissions (mkstemp would make it private to the user).
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        write_demo_database(tmp)
        # A leftover journal or WAL of an older file would be applied to the new one by SQLite.
        for suffix in ("-journal", "-wal", "-shm"):
            Path(f"{target}{suffix}").unlink(missing_ok=True)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _is_current(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    except sqlite3.DatabaseError:
        return False
    return bool(version == DEMO_SCHEMA_VERSION and app_id == DEMO_APPLICATION_ID)


def write_demo_database(path: Path) -> None:
    """Write the demo data into ``path`` (an empty or missing file), durably, in one transaction."""
    rows = _generate(random.Random(DEMO_SEED))
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        # The file is a private temporary until it is renamed, so no journal is needed while filling it.
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(SCHEMA)
        conn.execute("BEGIN")
        for table, table_rows in rows.items():
            placeholders = ", ".join("?" * len(table_rows[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({placeholders})", table_rows)
        conn.execute("COMMIT")
        conn.execute(f"PRAGMA application_id = {DEMO_APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {DEMO_SCHEMA_VERSION}")
        conn.execute("PRAGMA journal_mode = DELETE")
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


Row = tuple[int | float | str | None, ...]


def _generate(rng: random.Random) -> dict[str, list[Row]]:
    """All rows, table by table, in insertion order (parents before children)."""
    suppliers: list[Row] = [
        (i, name, country, f"orders@{_slug(name)}.example.com")
        for i, (name, country, _share, _rate) in enumerate(_SUPPLIERS, start=1)
    ]
    products = _products(rng)
    customers = _customers(rng)
    orders, order_items, shipments = _orders(rng, products, customers)
    return {
        "suppliers": suppliers,
        "products": products,
        "customers": customers,
        "orders": orders,
        "order_items": order_items,
        "shipments": shipments,
    }


def _slug(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _products(rng: random.Random) -> list[Row]:
    products: list[Row] = []
    for category, (nouns, (low, high)) in _CATALOG.items():
        for noun, style in itertools.product(nouns, _STYLES):
            if rng.random() < 0.35:
                continue
            product_id = len(products) + 1
            price = round(rng.uniform(low, high)) - 0.01  # shop prices end in .99
            sku = f"{category[:3].upper()}-{product_id:04d}"
            stock = rng.randint(0, 400)
            products.append((product_id, sku, f"{style} {noun}", category, round(price, 2), stock))
    return products


def _customers(rng: random.Random) -> list[Row]:
    """Customers in signup order, so those able to order on a given day are a prefix of the list."""
    span = (DEMO_AS_OF - timedelta(days=30) - date(2023, 6, 1)).days
    signups = sorted(date(2023, 6, 1) + timedelta(days=rng.randrange(span)) for _ in range(_N_CUSTOMERS))
    customers: list[Row] = []
    seen_emails: set[str] = set()
    for customer_id, signup in enumerate(signups, start=1):
        first, last = rng.choice(_FIRST_NAMES), rng.choice(_LAST_NAMES)
        email = f"{first}.{last}@example.com".lower()
        suffix = 2
        while email in seen_emails:
            email = f"{first}.{last}{suffix}@example.com".lower()
            suffix += 1
        seen_emails.add(email)
        city, country = rng.choice(_CITIES)
        customers.append((customer_id, first, last, email, city, country, signup.isoformat()))
    return customers


def _orders(
    rng: random.Random, products: list[Row], customers: list[Row]
) -> tuple[list[Row], list[Row], list[Row]]:
    """Orders, their items and the shipments of those items, day by day over the two years."""
    signup_days = [str(c[6]) for c in customers]
    # A few loyal customers order often: weights fall off with a (shuffled) rank.
    customer_weights = [1.0 / (rank + 8) for rank in range(len(customers))]
    rng.shuffle(customer_weights)
    customer_cum = list(itertools.accumulate(customer_weights))
    product_weights = [1.0 / (rank + 5) for rank in range(len(products))]
    rng.shuffle(product_weights)
    product_cum = list(itertools.accumulate(product_weights))
    supplier_cum = list(itertools.accumulate(share for _n, _c, share, _r in _SUPPLIERS))
    troubled = next(i for i, s in enumerate(_SUPPLIERS, start=1) if s[0] == _TROUBLED_SUPPLIER)

    orders: list[Row] = []
    items: list[Row] = []
    shipments: list[Row] = []
    total_days = (DEMO_AS_OF - DEMO_START).days + 1
    for day_index in range(total_days):
        day = DEMO_START + timedelta(days=day_index)
        growth = 7.0 + 6.0 * day_index / total_days
        season = 1.35 if day.month in (11, 12) else 1.0
        count = max(0, round(rng.gauss(growth * season, 2.0)))
        eligible = bisect.bisect_right(signup_days, day.isoformat())
        if eligible == 0:
            continue
        for _ in range(count):
            order_id = len(orders) + 1
            pick = rng.random() * customer_cum[eligible - 1]
            customer_id = bisect.bisect_right(customer_cum, pick, hi=eligible - 1) + 1
            cancelled = rng.random() < 0.03
            statuses: list[str] = []
            for _line in range(rng.choices((1, 2, 3, 4), weights=(50, 30, 15, 5))[0]):
                product = products[bisect.bisect_right(product_cum, rng.random() * product_cum[-1])]
                supplier_id = bisect.bisect_right(supplier_cum, rng.random() * supplier_cum[-1]) + 1
                rate = _SUPPLIERS[supplier_id - 1][3]
                if supplier_id == troubled and day >= _TROUBLE_STARTS:
                    rate = _TROUBLE_RATE
                backordered = rng.random() < rate
                quantity = rng.choices((1, 2, 3, 4, 5), weights=(55, 25, 10, 6, 4))[0]
                price = float(product[4] or 0)
                if rng.random() < 0.15:
                    price = round(price * 0.9, 2)
                item_id = len(items) + 1
                status, shipment = _fulfil(rng, day, backordered, cancelled, item_id, supplier_id)
                if shipment is not None:
                    shipments.append((len(shipments) + 1, *shipment))
                statuses.append(status)
                items.append((item_id, order_id, product[0], quantity, price, int(backordered), status))
            orders.append((order_id, customer_id, day.isoformat(), _order_status(statuses)))
    return orders, items, shipments


def _fulfil(
    rng: random.Random, day: date, backordered: bool, cancelled: bool, item_id: int, supplier_id: int
) -> tuple[str, Row | None]:
    """An item's status and, when it shipped before the snapshot, its shipment row (without an id)."""
    if cancelled:
        return "cancelled", None
    delay = rng.randint(12, 45) if backordered else rng.randint(0, 3)
    shipped = day + timedelta(days=delay)
    if shipped > DEMO_AS_OF:
        return ("awaiting_stock" if backordered else "processing"), None
    carrier, minimum, extra = rng.choice(_CARRIERS)
    delivered = shipped + timedelta(days=minimum + rng.randint(0, extra))
    in_transit = delivered > DEMO_AS_OF
    tracking = f"{carrier[:2].upper()}{item_id:08d}"
    delivered_text = None if in_transit else delivered.isoformat()
    row: Row = (item_id, supplier_id, carrier, tracking, shipped.isoformat(), delivered_text)
    return ("shipped" if in_transit else "delivered"), row


def _order_status(item_statuses: Sequence[str]) -> str:
    if all(s == "cancelled" for s in item_statuses):
        return "cancelled"
    if all(s == "delivered" for s in item_statuses):
        return "completed"
    if all(s in ("shipped", "delivered") for s in item_statuses):
        return "shipped"
    return "processing"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sqale_desktop.core.demo OUT.sqlite``: write (or keep, when current) a demo database."""
    parser = argparse.ArgumentParser(
        prog="python -m sqale_desktop.core.demo", description="Generate the SQaLe Desktop demo shop database."
    )
    parser.add_argument("out", type=Path, nargs="?", help="output file (default: the app's demo database)")
    parser.add_argument("--force", action="store_true", help="regenerate even when the file is current")
    args = parser.parse_args(argv)
    target: Path = default_demo_path() if args.out is None else args.out
    print(regenerate_demo_database(target) if args.force else ensure_demo_database(target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
