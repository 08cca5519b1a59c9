// The registry of device drivers (see device_driver.h).
#include "executor/device_driver.h"

namespace dl {

namespace {

std::vector<DeviceDriver>& drivers() {
    static std::vector<DeviceDriver> d;
    return d;
}

}  // namespace

void register_device(DeviceDriver driver) {
    for (DeviceDriver& d : drivers())
        if (d.name == driver.name) {
            d = std::move(driver);
            return;
        }
    drivers().push_back(std::move(driver));
}

const std::vector<DeviceDriver>& registered_devices() {
    return drivers();
}

}  // namespace dl
