/**
 * The lifecycle of each part of a node the daemon starts after the API exists and stops before the store
 * closes. Generic in what a plane is started with, so that this module imports none of the planes.
 */

/** A piece of the node: started with the node's context, stopped in reverse order at shutdown. */
export interface Plane<Context> {
  name: string;
  start(ctx: Context): Promise<void> | void;
  stop(): Promise<void> | void;
}
