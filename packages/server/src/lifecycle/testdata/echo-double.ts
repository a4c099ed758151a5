// Imported by echo-worker.ts, so its bundle has more than one module.
export const double = (n: number): number => n * 2;
