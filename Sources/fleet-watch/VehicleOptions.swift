import ArgumentParser
import FleetProtocol

/// `--vehicle` of a command that reads one vehicle's records: its id, refused at parsing
/// when the contract would not accept it (the reason named).
struct VehicleOption: ParsableArguments {
    @Option(help: "The vehicle.")
    var vehicle: String

    func validate() throws { _ = try checkedVehicle(vehicle) }

    /// The vehicle.
    var id: VehicleID { get throws { try checkedVehicle(vehicle) } }
}

/// `--vehicle` of a command that reads every vehicle's records unless it is given: only this
/// vehicle's, its id refused at parsing when the contract would not accept it.
struct VehicleFilterOption: ParsableArguments {
    @Option(help: "Only this vehicle.")
    var vehicle: String?

    func validate() throws { _ = try id }

    /// The vehicle, or `nil`: every vehicle.
    var id: VehicleID? { get throws { try vehicle.map(checkedVehicle) } }
}

/// `name` as a vehicle id, or a validation error saying why it is not one.
private func checkedVehicle(_ name: String) throws -> VehicleID {
    do { return try VehicleID(validating: name) } catch { throw ValidationError(error.description) }
}
