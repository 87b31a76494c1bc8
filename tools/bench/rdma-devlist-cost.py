#!/usr/bin/env python3
"""What one device-presence check of the RDMA stack costs (docs/rdma-transport.md §13):
ibv_get_device_list (the check, every ms_async_rdma_device_check_interval on worker 0) and
rdma_get_devices (librdmacm's sync, at each check while the device is away), each called
2000 times with its list freed; prints p50 and p99 in microseconds. Needs an RDMA device
(rxe): tests/rxe/run-in-guest -- python3 tools/bench/rdma-devlist-cost.py"""
import ctypes, time
v = ctypes.CDLL("libibverbs.so.1")
cm = ctypes.CDLL("librdmacm.so.1")
v.ibv_get_device_list.restype = ctypes.c_void_p
v.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
v.ibv_free_device_list.argtypes = [ctypes.c_void_p]
cm.rdma_get_devices.restype = ctypes.c_void_p
cm.rdma_get_devices.argtypes = [ctypes.POINTER(ctypes.c_int)]
cm.rdma_free_devices.argtypes = [ctypes.c_void_p]
n = ctypes.c_int(0)
def bench(get, free, k=2000):
    free(get(ctypes.byref(n)))
    ts = []
    for _ in range(k):
        t = time.perf_counter_ns(); l = get(ctypes.byref(n)); free(l); ts.append(time.perf_counter_ns() - t)
    ts.sort()
    return n.value, ts[len(ts)//2] / 1000, ts[int(len(ts)*0.99)] / 1000
print("ibv_get_device_list: %d devices, p50 %.1f us, p99 %.1f us" % bench(v.ibv_get_device_list, v.ibv_free_device_list))
print("rdma_get_devices:    %d devices, p50 %.1f us, p99 %.1f us" % bench(cm.rdma_get_devices, cm.rdma_free_devices))
