#!/usr/bin/env python3
"""A TCP forwarder that delays every byte by a fixed time in each direction, standing in for a
slow link (a vehicle on a cellular network) in `fleetcast-bench subscribe --rtt-ms N`, where no
netem is available. Order is kept; each chunk leaves `delay` after it arrived.

Usage: delay_proxy.py LISTEN_PORT TARGET_PORT ONE_WAY_DELAY_MS   (loopback only)
"""
import asyncio
import sys
import time


async def pump(reader, writer, delay):
    queue = asyncio.Queue()

    async def feed():
        while True:
            data = await reader.read(65536)
            await queue.put((time.monotonic() + delay, data))
            if not data:
                return

    async def drain():
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.close()
                return
            writer.write(data)
            await writer.drain()

    await asyncio.gather(feed(), drain())


async def main():
    listen_port, target_port, delay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000

    async def handle(client_reader, client_writer):
        target_reader, target_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(
            pump(client_reader, target_writer, delay), pump(target_reader, client_writer, delay), return_exceptions=True
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
