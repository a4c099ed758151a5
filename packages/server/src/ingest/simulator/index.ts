export {
  defaultSimulatorOptions,
  type ScenarioEvent,
  SimulatorError,
  type SimulatorOptions,
  type SimVm,
} from "./options.ts";
export { createSimulator, type Simulator } from "./simulator.ts";
export type { CounterState } from "./vm-model.ts";
