#ifndef FLEETCAST_CMOSQUITTO_SHIM_H
#define FLEETCAST_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
