#ifndef FLEETCAST_CYAML_SHIM_H
#define FLEETCAST_CYAML_SHIM_H
#include <yaml.h>
#endif
