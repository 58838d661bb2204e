import type { Policy, PolicyOptions } from 'sandgate'

/** open-multi-agent's options for one shell command. */
export interface ShellExecOptions {
  readonly cwd?: string
  readonly timeoutMs: number
  readonly abortSignal?: AbortSignal
}

/** open-multi-agent's result of one shell command. */
export interface ShellExecResult {
  readonly stdout: string
  readonly stderr: string
  /** 124 on timeout, 130 on abort, 127 when the command could not start or was refused. */
  readonly exitCode: number
}

/** open-multi-agent's `ShellExecutor`, run by sandgate's confined executor. */
export declare class SandgateShellExecutor {
  constructor(policyOrOptions?: Policy | PolicyOptions, baseDir?: string)
  start(): Promise<void>
  exec(command: string, options: ShellExecOptions): Promise<ShellExecResult>
  dispose(): Promise<void>
}
