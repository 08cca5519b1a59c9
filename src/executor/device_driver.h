// The registry through which device drivers other than the CPU chain (the Vulkan resident
// driver) offer themselves to the engine, so that the engine never depends on them and they
// never depend on the engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"

namespace dl {

// What an executor is built for: sessions of up to n_ctx tokens (0: the driver's default), and
// how many sequences run at once (a server's slots), which a device sizes its shared KV cache by.
struct Capacity {
    int64_t n_ctx = 0;
    int64_t sequences = 1;
    // A prefix cache will keep snapshots of sessions (a server's): the device's memory left over
    // goes to them (Executor::snapshot_room) and to more KV blocks for the rows they hold.
    bool prefix_cache = false;
};

// A device driver (the Vulkan resident driver) registers one of these, once, before models are
// opened. A driver that cannot run a model declines with a sentence instead of throwing.
struct DeviceDriver {
    std::string name;  // "vulkan": what --device names
    // Builds an executor on device `index` (-1: the driver's choice) for this capacity; on a
    // decline returns nullptr and sets *reason.
    std::function<std::unique_ptr<Executor>(std::shared_ptr<const Model> model, int index,
                                            Capacity capacity, std::string* reason)>
        make;
    // What the driver would do with the model on device `index` (-1: on each it sees), a line a
    // device, for `deltallm info` (may be empty).
    std::function<std::string(const Model& model, Capacity capacity, int index)> describe;
    // Under --device auto the driver is tried only when this returns true, i.e. it has a device
    // worth preferring to the CPU chain (a hardware GPU rather than a software rasterizer such
    // as lavapipe). Empty: always tried.
    std::function<bool()> preferred_under_auto;
    // The devices this driver sees and their features, for `deltallm info --devices`.
    std::function<std::string()> list_devices;
};

void register_device(DeviceDriver driver);
const std::vector<DeviceDriver>& registered_devices();

}  // namespace dl
