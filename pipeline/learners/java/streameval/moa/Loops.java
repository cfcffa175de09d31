package streameval.moa;

import com.yahoo.labs.samoa.instances.Instance;
import moa.classifiers.Classifier;

/**
 * MOA's calls for a block of rows, in one call from Python.
 *
 * <p>Called one by one from Python, a prediction crosses into Java twice (write the row,
 * ask the votes) and a training twice more (set the class, train). These loops make the
 * same learner calls in the same order, on the instance they are given (a MOA instance
 * over {@code buffer}: writing the buffer changes its values), for a whole block of rows
 * given as one array, one row after the other.
 */
public final class Loops {
    private Loops() {}

    /**
     * Test-then-train: for each row {@code i < n} of {@code rows} ({@code width} values,
     * the class value last), the learner's votes for the row with its class missing go
     * to {@code votes[i*k .. i*k+k)} (votes past {@code k} dropped, missing ones left 0),
     * then the learner trains on the row with its class.
     *
     * @return the rows done: {@code n}, or the row on which the learner threw, its
     *     exception in {@code failure[0]} and {@code step[0]} 0 (votes) or 1 (training)
     */
    public static int testThenTrain(
            Classifier learner, Instance instance, double[] buffer, double[] rows,
            int width, int n, int k, double[] votes, Throwable[] failure, int[] step) {
        int last = width - 1;
        for (int i = 0; i < n; i++) {
            System.arraycopy(rows, i * width, buffer, 0, last);
            buffer[last] = Double.NaN;
            try {
                copy(learner.getVotesForInstance(instance), votes, i * k, k);
            } catch (Throwable e) {
                failure[0] = e;
                step[0] = 0;
                return i;
            }
            buffer[last] = rows[i * width + last];
            try {
                learner.trainOnInstance(instance);
            } catch (Throwable e) {
                failure[0] = e;
                step[0] = 1;
                return i;
            }
        }
        return n;
    }

    /**
     * Predictions only: the learner's votes for each row {@code i < n} of
     * {@code features} (the {@code width} feature values of each row, one row after the
     * other; the class is left missing) go to {@code votes[i*k .. i*k+k)}.
     */
    public static void votes(
            Classifier learner, Instance instance, double[] buffer, double[] features,
            int width, int n, int k, double[] votes) {
        buffer[width] = Double.NaN;
        for (int i = 0; i < n; i++) {
            System.arraycopy(features, i * width, buffer, 0, width);
            copy(learner.getVotesForInstance(instance), votes, i * k, k);
        }
    }

    private static void copy(double[] from, double[] to, int at, int k) {
        System.arraycopy(from, 0, to, at, Math.min(from.length, k));
    }
}
