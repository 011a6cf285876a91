"""Ten sandboxes at once from asyncio: ``python examples/async_parallel.py [BACKEND]``."""

from __future__ import annotations

import asyncio
import sys

from sandbox_runtime import AsyncSandboxRuntime


async def one(index: int, backend: str, image: str | None) -> str:
    async with AsyncSandboxRuntime(backend=backend, image=image) as sandbox:
        await sandbox.write_text("n.txt", str(index))
        result = await sandbox.exec("echo $(( $(cat n.txt) * $(cat n.txt) ))")
        return result.stdout.strip()


async def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "local"
    image = sys.argv[2] if len(sys.argv) > 2 else None
    squares = await asyncio.gather(*(one(i, backend, image) for i in range(10)))
    print(squares)


if __name__ == "__main__":
    asyncio.run(main())
