"""Classes whose methods are workflows and steps of every kind (instance,
class and static), written once for both SDKs: with CLASS_DEFS_SDK=dbos the
import is the official DBOS Python package's (the interop app), else this
binding's. The import is the only difference, as the drop-in promises, so the
rows each SDK writes for the same calls can be compared."""

import os
from typing import Any, Dict, List

if os.environ.get("CLASS_DEFS_SDK") == "dbos":
    from dbos import DBOS, DBOSConfiguredInstance, SetWorkflowID
else:
    from dbos_agent import DBOS, DBOSConfiguredInstance, SetWorkflowID  # type: ignore[assignment]


@DBOS.dbos_class()
class Warehouse(DBOSConfiguredInstance):
    """A configured instance per site: its workflows use the instance's state."""

    def __init__(self, site: str, stock: int) -> None:
        super().__init__(site)
        self.stock = stock
        self.orders: List[str] = []

    @DBOS.step()
    def reserve(self, sku: str, qty: int) -> int:
        self.stock -= qty
        return self.stock

    @DBOS.workflow()
    def order(self, sku: str, qty: int) -> Dict[str, Any]:
        self.orders.append(str(DBOS.workflow_id))
        left = self.reserve(sku, qty)
        return {"site": self.config_name, "left": left, "price": Pricing.unit_price(sku) * qty + Pricing.tax(qty)}

    @DBOS.workflow()
    async def order_async(self, sku: str, qty: int) -> Dict[str, Any]:
        self.orders.append(str(DBOS.workflow_id))
        return {"site": self.config_name, "left": self.reserve(sku, qty)}


@DBOS.dbos_class(class_name="pricing-v2")
class Pricing:
    """Registered under a name of its own: class and static methods."""

    rate = 3

    @classmethod
    @DBOS.step()
    def unit_price(cls, sku: str) -> int:
        return cls.rate * len(sku)

    @classmethod
    @DBOS.workflow()
    def quote(cls, sku: str, qty: int) -> Dict[str, Any]:
        return {"cls": cls.__name__, "total": cls.unit_price(sku) * qty + Pricing.tax(qty)}

    @classmethod
    @DBOS.workflow()
    async def quote_async(cls, sku: str, qty: int) -> Dict[str, Any]:
        return {"cls": cls.__name__, "total": cls.unit_price(sku) * qty}

    @staticmethod
    @DBOS.step()
    def tax(qty: int) -> int:
        return qty

    @staticmethod
    @DBOS.workflow()
    def total(sku: str, qty: int) -> int:
        return Pricing.unit_price(sku) * qty + Pricing.tax(qty)


def compared_calls(prefix: str, north: Warehouse) -> None:
    """The calls whose rows the test compares between the SDKs, under the
    workflow ids <prefix>-<call>."""
    with SetWorkflowID(f"{prefix}-order"):
        north.order("apple", 2)
    with SetWorkflowID(f"{prefix}-start"):
        DBOS.start_workflow(north.order, "pear", 1).get_result()
    with SetWorkflowID(f"{prefix}-quote"):
        Pricing.quote("apple", 2)
    with SetWorkflowID(f"{prefix}-total"):
        Pricing.total("apple", 2)
