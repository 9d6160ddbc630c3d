"""What the board sources (serial, virtual, simavr) share: the firmware's frames
(firmware/PROTOCOL.md) read through one `MeterSession`. `tap`: the sweep's `MeterTap`; `rig`
and `checks`: their lines of `h2iot rig check`; `resolution`: one step of an ACS712 or an
INA219/INA226 channel; `cli`: `h2iot meter info|read|calibrate` on any board port."""
