/** Types for wink-naive-bayes-text-classifier (the package ships none). */
declare module "wink-naive-bayes-text-classifier" {
  export interface NaiveBayesTextClassifier {
    defineConfig(config: { readonly considerOnlyPresence?: boolean; readonly smoothingFactor?: number }): boolean
    definePrepTasks(tasks: ReadonlyArray<(input: string) => Array<string>>): number
    learn(input: string, label: string): boolean
    consolidate(): boolean
    predict(input: string): string
    /** [label, log2 odds] pairs, best first; `[["unknown", 0]]` when no token was seen in training. */
    computeOdds(input: string): Array<[string, number]>
    stats(): { readonly labelWiseSamples: Record<string, number>; readonly vocabulary: number }
  }
  const classifier: () => NaiveBayesTextClassifier
  export default classifier
}
