// The fleet's events and state (FleetEvent, VehicleSnapshot, FleetState…) are the pure
// FleetCore's; a user of the subscriber gets them with it.
@_exported import FleetCore
