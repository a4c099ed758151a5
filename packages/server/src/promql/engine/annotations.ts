/** Warnings and infos collected during evaluation (Prometheus util/annotations). */
export class Annotations {
  readonly warnings = new Set<string>();
  readonly infos = new Set<string>();

  warn(msg: string): void {
    this.warnings.add(`PromQL warning: ${msg}`);
  }
  info(msg: string): void {
    this.infos.add(`PromQL info: ${msg}`);
  }
}
